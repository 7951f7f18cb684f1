// service/validate.cc: a request checked against its caps (RequestLimits, service.h) before anything is matched or
// charged: the first field over its cap, named with the cap, in a RequestError; nothing made for a request that passes.
#include <string>

#include "service/service.h"

namespace rk::service {

std::optional<RequestError> Service::validate(const CheckRequest& r) const {
  const RequestLimits& l = options_.limits;
  auto too_long = [](std::size_t n, std::size_t max) {
    return "is " + std::to_string(n) + " bytes, over the limit of " + std::to_string(max);
  };
  if (r.domain.empty()) return RequestError{"domain", "must not be empty"};
  if (r.domain.size() > l.max_domain_bytes)
    return RequestError{"domain", too_long(r.domain.size(), l.max_domain_bytes)};
  if (r.descriptors.empty()) return RequestError{"descriptors", "must not be empty"};
  if (r.descriptors.size() > l.max_descriptors) {
    return RequestError{"descriptors", "has " + std::to_string(r.descriptors.size()) +
                                           " descriptors, over the limit of " + std::to_string(l.max_descriptors)};
  }
  if (r.hits_addend > l.max_hits) {
    return RequestError{"hits_addend",
                        std::to_string(r.hits_addend) + " is over the limit of " + std::to_string(l.max_hits)};
  }
  std::size_t request_bytes = 0;
  for (std::size_t i = 0; i < r.descriptors.size(); ++i) {
    const CheckDescriptor& d = r.descriptors[i];
    // The field's name, made only for an error (every request passes here).
    const auto at = [i] { return "descriptors[" + std::to_string(i) + "]"; };
    std::size_t bytes = 0;
    if (d.entries.empty()) return RequestError{at() + ".entries", "must not be empty"};
    if (d.entries.size() > l.max_entries) {
      return RequestError{at() + ".entries", "has " + std::to_string(d.entries.size()) +
                                                 " entries, over the limit of " + std::to_string(l.max_entries)};
    }
    if (d.hits_addend && *d.hits_addend > l.max_hits) {
      return RequestError{at() + ".hits_addend",
                          std::to_string(*d.hits_addend) + " is over the limit of " + std::to_string(l.max_hits)};
    }
    for (std::size_t j = 0; j < d.entries.size(); ++j) {
      const auto& [key, value] = d.entries[j];
      const auto e = [&] { return at() + ".entries[" + std::to_string(j) + "]"; };
      if (key.empty()) return RequestError{e() + ".key", "must not be empty"};
      if (key.size() > l.max_key_bytes) return RequestError{e() + ".key", too_long(key.size(), l.max_key_bytes)};
      if (value.size() > l.max_value_bytes)
        return RequestError{e() + ".value", too_long(value.size(), l.max_value_bytes)};
      bytes += key.size() + value.size();
    }
    if (bytes > l.max_descriptor_bytes) {
      return RequestError{at() + ".entries", "has keys and values of " + std::to_string(bytes) +
                                                 " bytes in all, over the limit of " +
                                                 std::to_string(l.max_descriptor_bytes) + " per descriptor"};
    }
    request_bytes += bytes;
    if (request_bytes > l.max_request_bytes) {
      return RequestError{"descriptors", "have keys and values of " + std::to_string(request_bytes) +
                                             " bytes in all by descriptors[" + std::to_string(i) +
                                             "], over the limit of " + std::to_string(l.max_request_bytes) +
                                             " per request"};
    }
  }
  return std::nullopt;
}

}  // namespace rk::service
