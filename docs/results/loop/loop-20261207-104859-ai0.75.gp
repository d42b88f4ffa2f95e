# loop-20261207-104859-ai0.75.gp - drawn by onigpu from loop-20261207-104859-ai0.75.dat; draw it again with: gnuplot loop-20261207-104859-ai0.75.gp
# (in this directory)
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
    set terminal pngcairo size 800,520 enhanced font 'Sans,11'
} else {
    set terminal png size 800,520 enhanced
}
set encoding utf8
set output 'loop-20261207-104859-ai0.75.png'
set title 'closed loop round trip p50, AI 0.75' noenhanced
set xlabel 'compute size (bytes)' noenhanced
set ylabel 'round trip p50 (us)' noenhanced
set grid
set key below
set logscale x 10
set format x '10^{%L}'
set logscale y 10
set format y '10^{%L}'
plot 'loop-20261207-104859-ai0.75.dat' index 0 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu' noenhanced, \
     '' index 1 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-staged' noenhanced, \
     '' index 2 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-direct' noenhanced, \
     '' index 3 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-graph' noenhanced, \
     '' index 4 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-flag' noenhanced, \
     '' index 5 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-persistent' noenhanced, \
     '' index 6 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'gpu-mapped' noenhanced
