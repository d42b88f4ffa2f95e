# view-20261207-113456-latency.gp - drawn by onigpu from view-20261207-113456-latency.dat; draw it again with: gnuplot view-20261207-113456-latency.gp
# (in this directory)
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
    set terminal pngcairo size 800,520 enhanced font 'Sans,11'
} else {
    set terminal png size 800,520 enhanced
}
set encoding utf8
set output 'view-20261207-113456-latency.png'
set title 'closed-loop latency with the live view''s clients (-1: no view)' noenhanced
set xlabel 'clients of the view' noenhanced
set ylabel 'latency (us)' noenhanced
set grid
set key below
set logscale y 10
set format y '10^{%L}'
plot 'view-20261207-113456-latency.dat' index 0 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'p50' noenhanced, \
     '' index 1 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'p99.9' noenhanced
