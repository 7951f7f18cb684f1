// store/memory/compact_key.h: a key of up to 16 bytes stored inline, longer ones on the heap (with their first 8
// bytes kept inline, so that most mismatches are told without reading the heap); 20 bytes in all.
//
// A store's slot that holds no key is "free": its length reads kFree and its bytes hold the store's free-list link,
// so that a slot in a table of entries needs no separate field for either.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace rk::store::memory {

class CompactKey {
 public:
  static constexpr std::uint32_t kInline = 16;
  static constexpr std::uint32_t kFree = 0xFFFFFFFFu;  // len_ of a free slot; keys are shorter (max_key_bytes)

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
      std::memcpy(data_ + 8, key.data(), 8);
    }
  }

  // Frees what the key holds and makes the slot free, holding `link` (the store's free list) in its bytes.
  void make_free(std::uint32_t link) {
    release();
    len_ = kFree;
    std::memcpy(data_, &link, sizeof link);
  }
  bool is_free() const { return len_ == kFree; }
  std::uint32_t link() const {
    std::uint32_t l;
    std::memcpy(&l, data_, sizeof l);
    return l;
  }

  std::string_view view() const { return is_free() ? std::string_view() : std::string_view{chars(), len_}; }
  // Equality without a call to memcmp for the usual keys (addresses, ids, API keys up to 16 bytes): two
  // overlapping 8- or 4-byte words from each side. A longer key compares its inline first 8 bytes first.
  [[gnu::always_inline]] bool equals(std::string_view key) const {
    if (key.size() != len_) return false;  // a free slot's kFree is no key's length
    const char* b = key.data();
    if (len_ <= kInline) return same_inline(data_, b, len_);
    return word<8>(data_ + 8) == word<8>(b) && std::memcmp(heap() + 8, b + 8, len_ - 8) == 0;
  }
  // Copies `len` <= kInline bytes from `from` to `to` by the same words, without a call to memcpy.
  [[gnu::always_inline]] static void copy_inline(char* to, const char* from, std::uint32_t len) {
    if (len >= 8) {
      const auto first = word<8>(from), last = word<8>(from + len - 8);
      std::memcpy(to, &first, 8);
      std::memcpy(to + len - 8, &last, 8);
    } else if (len >= 4) {
      const auto first = word<4>(from), last = word<4>(from + len - 4);
      std::memcpy(to, &first, 4);
      std::memcpy(to + len - 4, &last, 4);
    } else {
      for (std::uint32_t i = 0; i < len; ++i) to[i] = from[i];
    }
  }
  // Whether a and b, each `len` <= kInline bytes, are equal.
  [[gnu::always_inline]] static bool same_inline(const char* a, const char* b, std::uint32_t len) {
    if (len >= 8) return word<8>(a) == word<8>(b) && word<8>(a + len - 8) == word<8>(b + len - 8);
    if (len >= 4) return word<4>(a) == word<4>(b) && word<4>(a + len - 4) == word<4>(b + len - 4);
    return len == 0 || std::memcmp(a, b, len) == 0;
  }
  std::size_t heap_bytes() const { return on_heap() ? len_ : 0; }

 private:
  template <std::size_t N>
  static std::conditional_t<N == 8, std::uint64_t, std::uint32_t> word(const char* p) {
    std::conditional_t<N == 8, std::uint64_t, std::uint32_t> w;
    std::memcpy(&w, p, N);
    return w;
  }

  bool on_heap() const { return len_ > kInline && len_ != kFree; }
  const char* chars() const { return len_ <= kInline ? data_ : heap(); }
  char* heap() const {
    char* p;
    std::memcpy(&p, data_, sizeof p);
    return p;
  }
  void release() {
    if (on_heap()) delete[] heap();
    len_ = 0;
  }

  char data_[kInline];  // the key; or a pointer to it on the heap, then its first 8 bytes; or a free slot's link
  std::uint32_t len_ = kFree;
};

static_assert(sizeof(CompactKey) == 20 && alignof(CompactKey) == 4);

}  // namespace rk::store::memory
