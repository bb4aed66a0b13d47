#include "png_plot.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace kolo::plot {
namespace {

using Rgb = std::array<uint8_t, 3>;

// 3x5 glyphs, 15 bits: row 0 in the top three bits, the left pixel most significant.
uint16_t glyph(char c) {
  static const char* kChars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_./-()%";
  static const uint16_t kBits[] = {
      0x7B6F, 0x2C97, 0x73E7, 0x73CF, 0x5BC9, 0x79CF, 0x79EF, 0x7249, 0x7BEF, 0x7BCF,
      0x2BED, 0x6BAE, 0x3923, 0x6B6E, 0x79A7, 0x79A4, 0x396B, 0x5BED, 0x7497, 0x126A,
      0x5BAD, 0x4927, 0x5FED, 0x6B6D, 0x2B6A, 0x6BA4, 0x2B73, 0x6BAD, 0x388E, 0x7492,
      0x5B6F, 0x5B6A, 0x5BFD, 0x5AAD, 0x5A92, 0x72A7, 0x0007, 0x0002, 0x12A4, 0x01C0,
      0x2922, 0x224A, 0x52A5,  // ( ) %
  };
  const char* at = std::strchr(kChars, std::toupper(static_cast<unsigned char>(c)));
  return at == nullptr || c == '\0' ? 0 : kBits[at - kChars];
}

class Image {
 public:
  Image(int w, int h) : w_(w), h_(h), px_(static_cast<size_t>(w) * h, Rgb{255, 255, 255}) {}
  void set(int x, int y, Rgb c) {
    if (x >= 0 && y >= 0 && x < w_ && y < h_) px_[static_cast<size_t>(y) * w_ + x] = c;
  }
  void rect(int x0, int y0, int x1, int y1, Rgb c) {
    for (int y = y0; y <= y1; ++y)
      for (int x = x0; x <= x1; ++x) set(x, y, c);
  }
  void line(double x0, double y0, double x1, double y1, Rgb c, int width) {
    int steps = static_cast<int>(std::max(std::abs(x1 - x0), std::abs(y1 - y0))) + 1;
    for (int i = 0; i <= steps; ++i) {
      double t = static_cast<double>(i) / steps;
      int x = static_cast<int>(std::lround(x0 + (x1 - x0) * t)), y = static_cast<int>(std::lround(y0 + (y1 - y0) * t));
      rect(x - width / 2, y - width / 2, x + (width - 1) / 2, y + (width - 1) / 2, c);
    }
  }
  // Text at (x, y) = top left, glyphs scaled by `s`.
  void text(int x, int y, const std::string& t, Rgb c, int s = 2) {
    for (char ch : t) {
      uint16_t g = glyph(ch);
      for (int row = 0; row < 5; ++row)
        for (int col = 0; col < 3; ++col)
          if (g & (1 << (14 - row * 3 - col))) rect(x + col * s, y + row * s, x + col * s + s - 1, y + row * s + s - 1, c);
      x += 4 * s;
    }
  }
  static int text_width(const std::string& t, int s = 2) { return static_cast<int>(t.size()) * 4 * s; }
  int w() const { return w_; }
  int h() const { return h_; }
  const Rgb& at(int x, int y) const { return px_[static_cast<size_t>(y) * w_ + x]; }

 private:
  int w_, h_;
  std::vector<Rgb> px_;
};

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc = 0) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

void put32(std::string& s, uint32_t v) {
  for (int k = 3; k >= 0; --k) s.push_back(static_cast<char>((v >> (8 * k)) & 0xFF));
}

void chunk(std::string& out, const char* type, const std::string& data) {
  put32(out, static_cast<uint32_t>(data.size()));
  std::string body = std::string(type, 4) + data;
  out += body;
  put32(out, crc32(reinterpret_cast<const uint8_t*>(body.data()), body.size()));
}

// zlib stream of stored (uncompressed) deflate blocks: the plot is small, so size does
// not matter and no compressor is needed.
std::string zlib_stored(const std::string& raw) {
  std::string z = "\x78\x01";
  uint32_t a = 1, b = 0;
  for (unsigned char c : raw) a = (a + c) % 65521, b = (b + a) % 65521;
  size_t at = 0;
  do {
    size_t n = std::min<size_t>(65535, raw.size() - at);
    z.push_back(at + n == raw.size() ? 1 : 0);
    z.push_back(static_cast<char>(n & 0xFF));
    z.push_back(static_cast<char>(n >> 8));
    z.push_back(static_cast<char>(~n & 0xFF));
    z.push_back(static_cast<char>((~n >> 8) & 0xFF));
    z.append(raw, at, n);
    at += n;
  } while (at < raw.size());
  put32(z, (b << 16) | a);
  return z;
}

std::string encode(const Image& img) {
  std::string raw;
  raw.reserve(static_cast<size_t>(img.h()) * (img.w() * 3 + 1));
  for (int y = 0; y < img.h(); ++y) {
    raw.push_back(0);  // filter: none
    for (int x = 0; x < img.w(); ++x)
      for (uint8_t v : img.at(x, y)) raw.push_back(static_cast<char>(v));
  }
  std::string out = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  put32(ihdr, img.w());
  put32(ihdr, img.h());
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit RGB
  chunk(out, "IHDR", ihdr);
  chunk(out, "IDAT", zlib_stored(raw));
  chunk(out, "IEND", "");
  return out;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 10 || v == 0 ? "%.0f" : "%.1f", v);
  return buf;
}

}  // namespace

bool write_png(const Chart& c, const std::string& path, std::string* why) {
  static const Rgb kColors[] = {{214, 39, 40},  {31, 119, 180}, {44, 160, 44},  {255, 127, 14},
                                {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {127, 127, 127}};
  const Rgb black{0, 0, 0}, grey{225, 225, 225};
  Image img(900, 560);
  const int left = 70, right = 870, top = 50, bottom = 490;
  double ymax = 0;
  for (const Series& s : c.series)
    for (double v : s.y) ymax = std::max(ymax, v);
  // A round top: 1, 2 or 5 times a power of ten.
  double step = std::pow(10, std::floor(std::log10(std::max(ymax, 1e-9) / 5)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (ymax / (step * m) <= 6) { step *= m; break; }
  }
  const double ytop = std::max(step, std::ceil(ymax / step) * step);
  if (c.x.empty()) { *why = "no sizes to plot"; return false; }
  const double lx0 = std::log2(c.x.front()), lx1 = std::log2(c.x.back());
  auto px = [&](double x) { return lx1 == lx0 ? (left + right) / 2.0 : left + (std::log2(x) - lx0) / (lx1 - lx0) * (right - left); };
  auto py = [&](double y) { return bottom - y / ytop * (bottom - top); };
  for (double y = 0; y <= ytop + step / 2; y += step) {
    img.line(left, py(y), right, py(y), grey, 1);
    std::string t = number(y);
    img.text(left - 8 - Image::text_width(t), static_cast<int>(py(y)) - 5, t, black);
  }
  for (size_t i = 0; i < c.x.size(); ++i) {
    if (i >= c.x_ticks.size() || c.x_ticks[i].empty()) continue;
    img.line(px(c.x[i]), bottom, px(c.x[i]), bottom + 5, black, 1);
    img.text(static_cast<int>(px(c.x[i])) - Image::text_width(c.x_ticks[i]) / 2, bottom + 10, c.x_ticks[i], black);
  }
  img.line(left, top, left, bottom, black, 2);
  img.line(left, bottom, right, bottom, black, 2);
  for (size_t k = 0; k < c.series.size(); ++k) {
    const Series& s = c.series[k];
    const Rgb color = kColors[k % 8];
    for (size_t i = 1; i < s.y.size() && i < c.x.size(); ++i) {
      if (s.y[i - 1] < 0 || s.y[i] < 0) continue;
      img.line(px(c.x[i - 1]), py(s.y[i - 1]), px(c.x[i]), py(s.y[i]), color, 3);
    }
    const int ly = top + 8 + static_cast<int>(k) * 16;
    img.rect(left + 12, ly + 3, left + 32, ly + 6, color);
    img.text(left + 40, ly, s.name, black);
  }
  img.text(left, 18, c.title, black, 3);
  img.text((left + right - Image::text_width(c.x_label)) / 2, bottom + 36, c.x_label, black);
  img.text(8, top - 12, c.y_label, black);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  std::string png = encode(img);
  out.write(png.data(), static_cast<std::streamsize>(png.size()));
  out.close();
  if (!out) { *why = "cannot write " + path; return false; }
  return true;
}

}  // namespace kolo::plot
