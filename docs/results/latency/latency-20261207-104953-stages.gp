# latency-20261207-104953-stages.gp - drawn by onigpu from latency-20261207-104953-stages.dat; draw it again with: gnuplot latency-20261207-104953-stages.gp
# (in this directory)
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
    set terminal pngcairo size 800,520 enhanced font 'Sans,11'
} else {
    set terminal png size 800,520 enhanced
}
set encoding utf8
set output 'latency-20261207-104953-stages.png'
set title 'after the block''s last sample: each stage''s p50 (variant v0)' noenhanced
set xlabel 'block (frames)' noenhanced
set ylabel 'p50 (us)' noenhanced
set grid
set key below
set logscale x 10
set format x '10^{%L}'
set logscale y 10
set format y '10^{%L}'
plot 'latency-20261207-104953-stages.dat' index 0 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu after' noenhanced, \
     '' index 1 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu ready' noenhanced, \
     '' index 2 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu handoff' noenhanced, \
     '' index 3 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu compute' noenhanced, \
     '' index 4 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu write' noenhanced, \
     '' index 5 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-persistent after' noenhanced, \
     '' index 6 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-persistent write' noenhanced, \
     '' index 7 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-mapped after' noenhanced, \
     '' index 8 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-mapped ready' noenhanced, \
     '' index 9 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-mapped handoff' noenhanced, \
     '' index 10 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-mapped write' noenhanced
