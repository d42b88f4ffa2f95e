# latency-20261207-104953-blocks.gp - drawn by onigpu from latency-20261207-104953-blocks.dat; draw it again with: gnuplot latency-20261207-104953-blocks.gp
# (in this directory)
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
    set terminal pngcairo size 800,520 enhanced font 'Sans,11'
} else {
    set terminal png size 800,520 enhanced
}
set encoding utf8
set output 'latency-20261207-104953-blocks.png'
set title 'spike -> stimulus latency against block size (median of rounds)' noenhanced
set xlabel 'block (frames)' noenhanced
set ylabel 'latency (us)' noenhanced
set grid
set key below
set logscale x 10
set format x '10^{%L}'
set logscale y 10
set format y '10^{%L}'
plot 'latency-20261207-104953-blocks.dat' index 0 using 1:2 with lines lw 2 title 'block arithmetic: (block-1)/2 frames' noenhanced, \
     '' index 1 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu v0 p50' noenhanced, \
     '' index 2 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu v0 p99' noenhanced, \
     '' index 3 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu v0 p99.9' noenhanced, \
     '' index 4 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-persistent v0 p50' noenhanced, \
     '' index 5 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-persistent v0 p99' noenhanced, \
     '' index 6 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-persistent v0 p99.9' noenhanced, \
     '' index 7 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-mapped v0 p50' noenhanced, \
     '' index 8 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-mapped v0 p99' noenhanced, \
     '' index 9 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-mapped v0 p99.9' noenhanced
