// store/memory/compact_key.h: a key of up to 20 bytes stored inline, longer ones on the heap; 24 bytes in all.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

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
  bool equals(std::string_view key) const {
    return key.size() == len_ && (len_ == 0 || std::memcmp(len_ <= kInline ? data_ : heap(), key.data(), len_) == 0);
  }
  std::size_t heap_bytes() const { return len_ > kInline ? len_ : 0; }

 private:
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
