// store/memory/compact_key.h: a key of up to 20 bytes stored inline, longer ones on the heap; 24 bytes in all.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace rk::store {

class CompactKey {
 public:
  static constexpr std::uint32_t kInline = 20;

  CompactKey() = default;
  CompactKey(const CompactKey&) = delete;
  CompactKey& operator=(const CompactKey&) = delete;
  ~CompactKey() { release(); }

  void assign(std::string_view key) {
    release();
    len_ = static_cast<std::uint32_t>(key.size());
    if (len_ <= kInline) {
      if (len_ > 0) std::memcpy(data_, key.data(), key.size());  // an empty view's data() may be null
    } else {
      char* heap = new char[key.size()];
      std::memcpy(heap, key.data(), key.size());
      std::memcpy(data_, &heap, sizeof heap);
    }
  }

  void release() {
    if (len_ > kInline) delete[] heap();
    len_ = 0;
  }

  std::string_view view() const { return {len_ <= kInline ? data_ : heap(), len_}; }
  // Equality without a call to memcmp for the usual keys (addresses, ids, API keys up to 16 bytes): two
  // overlapping 8- or 4-byte words from each side.
  bool equals(std::string_view key) const {
    if (key.size() != len_) return false;
    const char* a = len_ <= kInline ? data_ : heap();
    const char* b = key.data();
    if (len_ >= 8 && len_ <= 16) return word<8>(a) == word<8>(b) && word<8>(a + len_ - 8) == word<8>(b + len_ - 8);
    if (len_ >= 4 && len_ < 8) return word<4>(a) == word<4>(b) && word<4>(a + len_ - 4) == word<4>(b + len_ - 4);
    return len_ == 0 || std::memcmp(a, b, len_) == 0;
  }
  std::size_t heap_bytes() const { return len_ > kInline ? len_ : 0; }

 private:
  template <std::size_t N>
  static std::conditional_t<N == 8, std::uint64_t, std::uint32_t> word(const char* p) {
    std::conditional_t<N == 8, std::uint64_t, std::uint32_t> w;
    std::memcpy(&w, p, N);
    return w;
  }

  char* heap() const {
    char* p;
    std::memcpy(&p, data_, sizeof p);
    return p;
  }

  alignas(8) char data_[kInline];
  std::uint32_t len_ = 0;
};

static_assert(sizeof(CompactKey) == 24);

}  // namespace rk::store
