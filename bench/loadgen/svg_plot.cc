#include "bench/loadgen/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace convoy::bench {
namespace {

constexpr double kPanelWidth = 460;
constexpr double kPanelHeight = 320;
constexpr double kMarginLeft = 70;
constexpr double kMarginTop = 50;
constexpr double kMarginBottom = 50;
constexpr double kGap = 90;
constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string Escape(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

struct Point {
  double x;
  double p50;
  double p99;
};

struct Axes {
  double x0, y0;  // the panel's top-left corner
  double x_max;
  double log_lo, log_hi;  // log10 of the y range
  double X(double x) const { return x0 + kPanelWidth * x / x_max; }
  double Y(double y) const {
    const double l = std::log10(std::max(y, std::pow(10.0, log_lo)));
    return y0 + kPanelHeight * (1.0 - (l - log_lo) / (log_hi - log_lo));
  }
};

std::string Panel(const std::vector<std::pair<std::string, std::vector<Point>>>& series,
                  const Axes& a, const std::string& label) {
  std::string out;
  absl::StrAppendFormat(&out,
                        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                        "stroke=\"#333\"/>\n",
                        a.x0, a.y0, kPanelWidth, kPanelHeight);
  // Decades on y, five ticks on x.
  for (int e = static_cast<int>(std::floor(a.log_lo)); e <= static_cast<int>(std::ceil(a.log_hi));
       ++e) {
    if (e < a.log_lo - 1e-9 || e > a.log_hi + 1e-9) continue;
    const double y = a.Y(std::pow(10.0, e));
    absl::StrAppendFormat(
        &out,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
        a.x0, y, a.x0 + kPanelWidth, y, a.x0 - 6, y + 4, std::pow(10.0, e));
  }
  for (int i = 0; i <= 5; ++i) {
    const double v = a.x_max * i / 5.0;
    const double x = a.X(v);
    absl::StrAppendFormat(
        &out,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n"
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n",
        x, a.y0, x, a.y0 + kPanelHeight, x, a.y0 + kPanelHeight + 16, v);
  }
  absl::StrAppendFormat(
      &out,
      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">output tokens/s</text>\n"
      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 %.1f %.1f)\">%s (ms, log)</text>\n",
      a.x0 + kPanelWidth / 2, a.y0 + kPanelHeight + 36, a.x0 - 50, a.y0 + kPanelHeight / 2,
      a.x0 - 50, a.y0 + kPanelHeight / 2, Escape(label));
  for (size_t s = 0; s < series.size(); ++s) {
    const char* colour = kColours[s % std::size(kColours)];
    const std::vector<Point>& pts = series[s].second;
    for (int which = 0; which < 2; ++which) {
      std::string polyline;
      for (const Point& p : pts) {
        absl::StrAppendFormat(&polyline, "%.1f,%.1f ", a.X(p.x), a.Y(which == 0 ? p.p50 : p.p99));
      }
      absl::StrAppendFormat(&out,
                            "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" "
                            "stroke-width=\"1.5\"%s/>\n",
                            polyline, colour, which == 0 ? "" : " stroke-dasharray=\"5,3\"");
      for (const Point& p : pts) {
        absl::StrAppendFormat(&out,
                              "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" stroke=\"%s\" "
                              "stroke-width=\"1.5\"><title>%s p%s: %.1f ms at %.0f tok/s</title>"
                              "</circle>\n",
                              a.X(p.x), a.Y(which == 0 ? p.p50 : p.p99),
                              which == 0 ? colour : "white", colour, Escape(series[s].first),
                              which == 0 ? "50" : "99", which == 0 ? p.p50 : p.p99, p.x);
      }
    }
  }
  return out;
}

}  // namespace

std::string LatencyThroughputSvg(const std::vector<RunResult>& runs, const std::string& title) {
  // Series in first-seen order of config.
  std::vector<std::pair<std::string, std::vector<Point>>> ttft, itl;
  std::map<std::string, size_t> index;
  double x_max = 1;
  double lo = 1e300;
  double hi = 0;
  for (const RunResult& r : runs) {
    const ClassStats* a = r.all();
    if (!r.error.empty() || a == nullptr || a->ttft_s.count == 0) continue;
    auto [it, inserted] = index.emplace(r.config, ttft.size());
    if (inserted) {
      ttft.push_back({r.config, {}});
      itl.push_back({r.config, {}});
    }
    const double x = a->output_tokens_per_s;
    ttft[it->second].second.push_back({x, a->ttft_s.p50 * 1e3, a->ttft_s.p99 * 1e3});
    if (a->itl_s.count > 0) {
      itl[it->second].second.push_back({x, a->itl_s.p50 * 1e3, a->itl_s.p99 * 1e3});
    }
    x_max = std::max(x_max, x);
    for (double v : {a->ttft_s.p50, a->ttft_s.p99, a->itl_s.p50, a->itl_s.p99}) {
      if (v > 0 && std::isfinite(v)) {
        lo = std::min(lo, v * 1e3);
        hi = std::max(hi, v * 1e3);
      }
    }
  }
  for (auto* s : {&ttft, &itl}) {
    for (auto& [name, pts] : *s) {
      std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) { return a.x < b.x; });
    }
  }
  if (hi <= 0) {
    lo = 0.1;
    hi = 1000;
  }
  // Round the throughput axis up to a "nice" number.
  const double step = std::pow(10.0, std::floor(std::log10(x_max)));
  x_max = std::ceil(x_max * 1.05 / step) * step;
  const double log_lo = std::floor(std::log10(lo));
  const double log_hi = std::max(std::ceil(std::log10(hi)), log_lo + 1);

  const double legend_height = 18.0 * static_cast<double>(ttft.size()) + 30;
  const double width = kMarginLeft + 2 * kPanelWidth + kGap + 30;
  const double height = kMarginTop + kPanelHeight + kMarginBottom + legend_height;
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%.1f\" y=\"24\" font-size=\"15\" text-anchor=\"middle\">%s</text>\n",
      width, height, width / 2, Escape(title));
  const Axes left{kMarginLeft, kMarginTop, x_max, log_lo, log_hi};
  const Axes right{kMarginLeft + kPanelWidth + kGap, kMarginTop, x_max, log_lo, log_hi};
  absl::StrAppend(&out, Panel(ttft, left, "time to first token"));
  absl::StrAppend(&out, Panel(itl, right, "inter-token latency"));
  double y = kMarginTop + kPanelHeight + kMarginBottom + 10;
  absl::StrAppendFormat(&out,
                        "<text x=\"%.1f\" y=\"%.1f\">filled, solid: p50; hollow, dashed: p99"
                        "</text>\n",
                        kMarginLeft, y);
  for (size_t s = 0; s < ttft.size(); ++s) {
    y += 18;
    const char* colour = kColours[s % std::size(kColours)];
    absl::StrAppendFormat(&out,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n"
                          "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                          kMarginLeft, y - 10, colour, kMarginLeft + 18, y, Escape(ttft[s].first));
  }
  absl::StrAppend(&out, "</svg>\n");
  return out;
}

}  // namespace convoy::bench
