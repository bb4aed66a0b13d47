// A line plot written straight to PNG (no plotting library on the build machines): log2
// x axis, linear y axis from 0, one coloured line per series, a legend, tick labels in a
// built-in 3x5 pixel font (upper case, digits, a few signs).
#pragma once

#include <string>
#include <vector>

namespace kolo::plot {

struct Series {
  std::string name;
  std::vector<double> y;  // one value per x; negative = missing
};

struct Chart {
  std::string title;
  std::string x_label, y_label;
  std::vector<double> x;        // > 0, increasing (plotted on a log2 scale)
  std::vector<std::string> x_ticks;  // label per x ("" = none)
  std::vector<Series> series;
};

// Writes a PNG; false (and a message in *why) on failure.
bool write_png(const Chart& chart, const std::string& path, std::string* why);

}  // namespace kolo::plot
