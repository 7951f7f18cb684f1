// base/same_owner.h: whether a weak_ptr was taken from the very object a shared_ptr owns, without locking it
// (and so without keeping a retired object alive or racing its release): how a per-object cache tells that the
// object it was built for has been replaced.
//
//   std::weak_ptr<const RuleSet> bound_;
//   if (!same_owner(bound_, current)) rebuild(current);   // also true after `current` was swapped and freed
//
// By control block, not address: an object freed and another allocated at its address are still told apart. Two
// empty pointers have the same (no) owner.
#pragma once

#include <memory>

namespace rk::base {

template <class T>
bool same_owner(const std::weak_ptr<T>& a, const std::shared_ptr<T>& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

}  // namespace rk::base
