// Figures through gnuplot: the data files plus one re-runnable plots.gp in the output
// directory, rendered to PNG when gnuplot is installed (a message, never a failure, when not).
//
//   experiment::Figures fig(out);
//   fig.dynamics("dynamics.png", "training dynamics", {{"attn_sink", "Attn_<s>"}, ...},
//                {{"vanilla", "dynamics_vanilla.csv"}, {"vga", "dynamics_vga.csv"}});
//   fig.heatmaps("attention.png", "attention maps", {{"vanilla", "attn_vanilla.dat"}}, {.labels = tokens});
//   experiment::write_matrix(out / "attn_vanilla.dat", values, rows, cols);  // a heatmap's data
//   fig.by_layer("by_layer.png", "final models", layers, panels, variants, value);  // a line per variant
//   fig.bars("kurtosis.png", "average kurtosis", "kurtosis.dat");   // label mean sd rows
//   fig.script("...");                                              // anything else, verbatim
//   fig.render();
//
// Dynamics files are those write_dynamics() makes: step, then <metric>_mean, _min, _max.
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "sinklab/experiment/run.hpp"
#include "sinklab/experiment/stats.hpp"
#include "sinklab/io/files.hpp"
#include "sinklab/io/metrics_log.hpp"

namespace sinklab::experiment {

// Mean, min and max over seeds of each metric at every step all runs logged.
inline void write_dynamics(const fs::path& file, const std::vector<const RunResult*>& runs,
                           const std::vector<std::string>& metrics) {
  SINKLAB_CHECK(!runs.empty(), "experiment::write_dynamics: no runs for '", file.string(), "'");
  io::CsvLog csv(file);
  for (const Json& first : runs.front()->history) {
    const int64_t step = first.value("step", int64_t{-1});
    io::LogRow row{{"step", step}};
    bool all = true;
    std::vector<std::vector<double>> xs(metrics.size());
    for (const auto* r : runs) {
      const Json* at = nullptr;
      for (const Json& h : r->history)
        if (h.value("step", int64_t{-2}) == step) at = &h;
      if (!at) {
        all = false;
        break;
      }
      for (std::size_t m = 0; m < metrics.size(); ++m)
        xs[m].push_back(at->contains(metrics[m]) ? number((*at)[metrics[m]]) : NAN);
    }
    if (!all) continue;
    for (std::size_t m = 0; m < metrics.size(); ++m) {
      const Spread s = summarize(xs[m]);
      row.emplace_back(metrics[m] + "_mean", s.mean);
      row.emplace_back(metrics[m] + "_min", s.min);
      row.emplace_back(metrics[m] + "_max", s.max);
    }
    csv.log(row);
  }
}

// The last step any of `runs` logged (0 for none): a Panel::from_step is a fraction of it.
inline int64_t last_step(const std::vector<const RunResult*>& runs) {
  int64_t last = 0;
  for (const auto* r : runs)
    if (!r->history.empty()) last = std::max(last, r->history.back().value("step", int64_t{0}));
  return last;
}

// Single-quoted gnuplot (and shell) string: the quote itself is doubled.
inline std::string gp_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

inline const char* palette(std::size_t i) {
  static const char* colours[] = {"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd",
                                  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return colours[i % (sizeof colours / sizeof *colours)];
}

// The axes of heatmaps(): names, tick labels or index ticks, and the cells' shape.
struct HeatmapAxes {
  std::string x = "key", y = "query";
  // tick labels of both axes (a square map), or none: indices ("{}": GCC 12 warns of a designated
  // initializer that skips a member without a default)
  std::vector<std::string> labels{};
  int64_t x_first = 0, y_first = 0;  // the index shown for the first column and the first row
  int64_t tick = 0;                  // > 0: a tick every `tick` indices (0: gnuplot's choice)
  bool square = true;                // square cells (false: each panel keeps the figure's shape)
};

class Figures {
 public:
  struct Panel {
    std::string metric, title;
    bool log_y = false;
    // Points before this step are not drawn: a loss panel that starts at ln(V) would set a
    // y-range in which every later difference is flat (pass the end of the warm-up, say).
    int64_t from_step = 0;
  };
  struct Series {
    std::string label, file;  // file relative to the output directory
  };

  explicit Figures(fs::path dir) : dir_(std::move(dir)) {
    const bool cairo = have_gnuplot() && std::system("gnuplot -e 'set terminal pngcairo' > /dev/null 2>&1") == 0;
    term_ = cairo ? "pngcairo noenhanced font 'DejaVu Sans,10'" : "png noenhanced";
    cairo_ = cairo;
    gp_ << "# Re-run with: cd <this directory> && gnuplot plots.gp\nset datafile separator ','\n";
  }

  static bool have_gnuplot() { return std::system("command -v gnuplot > /dev/null 2>&1") == 0; }
  const std::string& terminal() const { return term_; }
  bool cairo() const { return cairo_; }

  // A grid of panels, one line per series (its mean) and a band from min to max over seeds.
  void dynamics(const std::string& png, const std::string& title, const std::vector<Panel>& panels,
                const std::vector<Series>& series, int columns = 3) {
    const int rows = static_cast<int>((panels.size() + columns - 1) / columns);
    gp_ << "set terminal " << term_ << " size " << 500 * columns << "," << 380 * rows + 40 << "\n";
    gp_ << "set output " << gp_quote(png) << "\nset multiplot layout " << rows << "," << columns << " title "
        << gp_quote(title) << "\nset key top right font ',9'\nset grid\nset xlabel 'step'\n"
        << "set datafile columnheaders\n";
    if (cairo_) gp_ << "set style fill transparent solid 0.18 noborder\n";
    for (std::size_t p = 0; p < panels.size(); ++p) {
      gp_ << "set title " << gp_quote(panels[p].title) << "\n" << (panels[p].log_y ? "set" : "unset")
          << " logscale y\nplot ";
      const std::string shown = "column(1) >= " + std::to_string(panels[p].from_step) + " ? ";
      for (std::size_t s = 0; s < series.size(); ++s) {
        const std::string f = gp_quote(series[s].file), lc = std::string("lc rgb '") + palette(s) + "'";
        const std::string m = panels[p].metric;
        if (cairo_)
          gp_ << (s ? ", " : "") << f << " using 1:(" << shown << "column('" << m << "_min') : 1/0):(column('" << m
              << "_max')) with filledcurves " << lc << " notitle";
        gp_ << ((cairo_ || s) ? ", " : "") << f << " using 1:(" << shown << "column('" << m
            << "_mean') : 1/0) with lines lw 2 " << lc << " title " << (p == 0 ? gp_quote(series[s].label) : "''");
      }
      gp_ << "\n";
    }
    gp_ << "unset multiplot\nunset logscale y\nunset xlabel\nunset datafile columnheaders\n";
    pngs_.push_back(png);
  }

  // Matrices side by side (whitespace-separated .dat files, first row at the top), values in
  // [0, max] on one colour scale.
  void heatmaps(const std::string& png, const std::string& title, const std::vector<Series>& maps,
                const HeatmapAxes& axes = {}, double max = 1.0) {
    const auto n_maps = static_cast<int64_t>(maps.size());
    if (axes.square)
      gp_ << "set terminal " << term_ << " size " << 520 * n_maps << ",560\n";
    else
      gp_ << "set terminal " << term_ << " size " << 320 * n_maps + 80 << ",420\n";
    gp_ << "set output " << gp_quote(png) << "\nset multiplot layout 1," << n_maps << " title " << gp_quote(title) << "\n";
    gp_ << "set datafile separator whitespace\nunset grid\nunset key\n" << (axes.square ? "set size ratio -1\n" : "")
        << "set palette defined (0 'white', 0.5 '#6baed6', 1 '#08306b')\nset cbrange [0:" << max << "]\n";
    if (!axes.labels.empty()) {
      std::string t = "(";
      for (std::size_t i = 0; i < axes.labels.size(); ++i)
        t += (i ? ", " : "") + gp_quote(axes.labels[i]) + " " + std::to_string(i);
      t += ")";
      const long n = static_cast<long>(axes.labels.size());
      gp_ << "set xrange [-0.5:" << n - 0.5 << "]\nset yrange [" << n - 0.5 << ":-0.5]\n";
      gp_ << "set xtics " << t << " font ',8'\nset ytics " << t << " font ',8'\n";
    } else {
      gp_ << "set autoscale xfix\nset autoscale yfix\nset yrange [*:*] reverse\n";
      if (axes.tick > 0) gp_ << "set xtics " << axes.tick << "\nset ytics " << axes.tick << "\n";
    }
    gp_ << "set xlabel " << gp_quote(axes.x) << "\nset ylabel " << gp_quote(axes.y) << "\n";
    const std::string at = " matrix using ($1 + " + std::to_string(axes.x_first) + "):($2 + " +
                           std::to_string(axes.y_first) + "):3 with image\n";
    for (const auto& m : maps) gp_ << "set title " << gp_quote(m.label) << "\nplot " << gp_quote(m.file) << at;
    gp_ << "unset multiplot\nset size noratio\nunset xlabel\nunset ylabel\nset xtics autofreq\nset ytics autofreq\n"
        << "set xrange [*:*]\nset yrange [*:*] noreverse\nset datafile separator ','\n";
    pngs_.push_back(png);
  }

  // Per-layer measures: one panel per measure (Panel::metric is the key a value is asked for), a
  // line per variant over layers 1..layers; value(variant, layer, key) is the point (NaN: none).
  // The data go to <png without .png>.csv beside the figure.
  void by_layer(const std::string& png, const std::string& title, int64_t layers, const std::vector<Panel>& panels,
                const std::vector<std::string>& variants,
                const std::function<double(const std::string&, int64_t, const std::string&)>& value, int columns = 2) {
    const std::string csv = png.substr(0, png.rfind('.')) + ".csv";
    std::ostringstream data;
    data << "layer";
    for (const auto& v : variants)
      for (const auto& p : panels) data << ',' << v << ':' << p.metric;
    data << '\n';
    for (int64_t l = 0; l < layers; ++l) {
      data << l + 1;
      for (const auto& v : variants)
        for (const auto& p : panels) {
          const double x = value(v, l, p.metric);
          data << ',';
          if (std::isfinite(x)) data << x;
          else data << "NaN";
        }
      data << '\n';
    }
    io::write_file_atomically(dir_ / csv, data.str());
    const int rows = static_cast<int>((panels.size() + columns - 1) / columns);
    gp_ << "set terminal " << term_ << " size " << 650 * columns << "," << 420 * rows + 60 << "\nset output "
        << gp_quote(png) << "\nset multiplot layout " << rows << "," << columns << " title " << gp_quote(title)
        << "\nset xlabel 'layer'\nset grid\nset key outside right top font ',8'\n";
    for (std::size_t k = 0; k < panels.size(); ++k) {
      gp_ << "set title " << gp_quote(panels[k].title) << "\n" << (panels[k].log_y ? "set" : "unset") << " logscale y\nplot ";
      for (std::size_t j = 0; j < variants.size(); ++j)
        gp_ << (j ? ", " : "") << gp_quote(csv) << " using 1:" << 2 + j * panels.size() + k
            << " with linespoints lw 2 lc rgb '" << palette(j) << "' title " << gp_quote(variants[j]);
      gp_ << "\n";
    }
    gp_ << "unset multiplot\nunset logscale y\nunset xlabel\nset key default\n";
    pngs_.push_back(png);
  }

  // One bar per row of a bars file (see write_bars): height = mean, error bar = sd. The first
  // and last bars stay inside the frame; on a log axis an error bar that would reach zero or below
  // is cut at a tenth of its bar (a log axis cannot draw it), and the title says so.
  void bars(const std::string& png, const std::string& title, const std::string& file, const std::string& ylabel = "",
            bool log_y = false) {
    gp_ << "set terminal " << term_ << " size 900,520\nset output " << gp_quote(png) << "\n";
    gp_ << "set title " << gp_quote(log_y ? title + " (log axis: error bars cut at a tenth of the bar)" : title)
        << "\nunset key\nset grid ytics\nset boxwidth 0.6\n"
        << "set style fill solid 0.7 border -1\nset ylabel " << gp_quote(ylabel) << "\n"
        << (log_y ? "set logscale y\nset yrange [*:*]\n" : "unset logscale y\nset yrange [0:*]\n")
        << "set offsets 0.6, 0.6, 0, 0\nset xtics rotate by -30\n";
    const std::string low = log_y ? "($2 - $3 > $2 / 10 ? $2 - $3 : $2 / 10)" : "($2 - $3)";
    gp_ << "plot " << gp_quote(file) << " skip 1 using 0:2:xtic(1) with boxes lc rgb '#1f77b4', " << gp_quote(file)
        << " skip 1 using 0:2:" << low << ":($2 + $3) with yerrorbars pt 0 lc rgb 'black'\n";
    gp_ << "set offsets 0, 0, 0, 0\nset xtics norotate autofreq\nunset logscale y\nset yrange [*:*]\nunset ylabel\n";
    pngs_.push_back(png);
  }

  // Anything else, verbatim (must set its own terminal and output).
  void script(const std::string& text, const std::string& png = "") {
    gp_ << text;
    if (!text.empty() && text.back() != '\n') gp_ << "\n";
    if (!png.empty()) pngs_.push_back(png);
  }

  // Writes plots.gp and runs gnuplot on it; returns whether PNGs were made.
  bool render() {
    io::write_file_atomically(dir_ / "plots.gp", gp_.str());
    if (!have_gnuplot()) {
      std::printf("plots: gnuplot not found, so no PNGs; the data and %s are written (install gnuplot, e.g. "
                  "apt-get install gnuplot-nox, and run `gnuplot plots.gp` there)\n",
                  (dir_ / "plots.gp").string().c_str());
      return false;
    }
    const std::string cmd = "cd " + gp_quote(dir_.string()) + " && gnuplot plots.gp 2> plots.log";
    if (std::system(cmd.c_str()) != 0) {
      std::printf("plots: gnuplot failed on %s (see plots.log there); the data files are complete\n",
                  (dir_ / "plots.gp").string().c_str());
      return false;
    }
    std::string list;
    for (const auto& p : pngs_) list += (list.empty() ? "" : ", ") + (dir_ / p).string();
    std::printf("plots: %s\n", list.c_str());
    return true;
  }

 private:
  fs::path dir_;
  std::ostringstream gp_;
  std::string term_;
  bool cairo_ = false;
  std::vector<std::string> pngs_;
};

// A matrix file for Figures::heatmaps: `rows` lines of `cols` whitespace-separated values
// (row-major `values`), written atomically; its folder is created.
inline void write_matrix(const fs::path& file, const double* values, int64_t rows, int64_t cols) {
  std::string s;
  char buf[32];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      std::snprintf(buf, sizeof buf, c ? " %.6g" : "%.6g", values[r * cols + c]);
      s += buf;
    }
    s += '\n';
  }
  if (file.has_parent_path()) fs::create_directories(file.parent_path());
  io::write_file_atomically(file, s);
}

// A bars file: "label,mean,sd" rows, one per variant, for Figures::bars.
inline void write_bars(const fs::path& file, const std::vector<std::pair<std::string, Spread>>& bars) {
  std::ostringstream s;
  s << "label,mean,sd\n";
  for (const auto& [label, sp] : bars) s << '"' << label << "\"," << sp.mean << ',' << (std::isfinite(sp.sd) ? sp.sd : 0) << "\n";
  io::write_file_atomically(file, s.str());
}

}  // namespace sinklab::experiment
