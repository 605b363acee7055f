# The sink-forming cell (wd0.5+init-gu) in three seeds, from each run's metrics.csv (copied here as
# seed0.csv, seed1.csv, seed2.csv): cd <folder with them> && gnuplot sink-emergence-seeds.gp
set terminal pngcairo noenhanced font 'DejaVu Sans,10' size 1200,760
set output 'sink-emergence-seeds.png'
set datafile separator ','
set datafile columnheaders
set multiplot layout 2,2 title 'wd0.5+init-gu (T 256, BOS, constant 3e-3, weight decay 0.5, N(0, sqrt(2/5d))): seeds 0, 1 and 2'
set grid
set key top left
set xlabel 'tokens seen'
set format x '%.0s%c'
set title 'largest alpha_0 of any head (first 64 queries); dashed: uniform'
set yrange [0:0.7]
plot 'seed0.csv' using (column('tokens')):(column('alpha_max')) with linespoints lw 2 lc rgb '#1f77b4' title 'seed 0', \
     'seed1.csv' using (column('tokens')):(column('alpha_max')) with linespoints lw 2 lc rgb '#d62728' title 'seed 1', \
     'seed2.csv' using (column('tokens')):(column('alpha_max')) with linespoints lw 2 lc rgb '#2ca02c' title 'seed 2', \
     0.074 with lines dt 2 lc rgb 'gray' title 'uniform'
set title 'Sink^0.3 (fraction of the 16 heads with alpha_0 > 0.3)'
set yrange [0:0.5]
plot 'seed0.csv' using (column('tokens')):(column('sink03')) with linespoints lw 2 lc rgb '#1f77b4' title 'seed 0', \
     'seed1.csv' using (column('tokens')):(column('sink03')) with linespoints lw 2 lc rgb '#d62728' title 'seed 1', \
     'seed2.csv' using (column('tokens')):(column('sink03')) with linespoints lw 2 lc rgb '#2ca02c' title 'seed 2'
set title 'top-1 |x| / median |x| of a layer output (at BOS in every seed)'
set yrange [0:*]
plot 'seed0.csv' using (column('tokens')):(column('massive')) with linespoints lw 2 lc rgb '#1f77b4' title 'seed 0', \
     'seed1.csv' using (column('tokens')):(column('massive')) with linespoints lw 2 lc rgb '#d62728' title 'seed 1', \
     'seed2.csv' using (column('tokens')):(column('massive')) with linespoints lw 2 lc rgb '#2ca02c' title 'seed 2'
set title 'Avg kurtosis'
plot 'seed0.csv' using (column('tokens')):(column('avg_kurtosis')) with linespoints lw 2 lc rgb '#1f77b4' title 'seed 0', \
     'seed1.csv' using (column('tokens')):(column('avg_kurtosis')) with linespoints lw 2 lc rgb '#d62728' title 'seed 1', \
     'seed2.csv' using (column('tokens')):(column('avg_kurtosis')) with linespoints lw 2 lc rgb '#2ca02c' title 'seed 2'
unset multiplot
