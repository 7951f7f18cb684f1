#include "base/same_owner.h"

#include <gtest/gtest.h>

namespace rk::base {
namespace {

TEST(SameOwner, TellsObjectsApartByOwnerNotAddress) {
  auto a = std::make_shared<const int>(1);
  std::weak_ptr<const int> bound = a;
  EXPECT_TRUE(same_owner(bound, a));
  auto b = std::make_shared<const int>(1);
  EXPECT_FALSE(same_owner(bound, b));
  // An aliasing pointer into the same object shares its owner.
  struct Pair {
    int x, y;
  };
  auto p = std::make_shared<const Pair>(Pair{1, 2});
  std::weak_ptr<const int> y = std::shared_ptr<const int>(p, &p->y);
  EXPECT_TRUE(same_owner(y, std::shared_ptr<const int>(p, &p->x)));
}

TEST(SameOwner, AFreedObjectIsNotItsSuccessorEvenAtItsAddress) {
  std::weak_ptr<const int> bound;
  {
    auto a = std::make_shared<const int>(1);
    bound = a;
  }
  EXPECT_TRUE(bound.expired());
  auto b = std::make_shared<const int>(2);  // may well reuse the freed block
  EXPECT_FALSE(same_owner(bound, b));
}

TEST(SameOwner, EmptyPointersShareNoOwner) {
  EXPECT_TRUE(same_owner(std::weak_ptr<const int>(), std::shared_ptr<const int>()));
  EXPECT_FALSE(same_owner(std::weak_ptr<const int>(), std::make_shared<const int>(0)));
}

}  // namespace
}  // namespace rk::base
