#include "common/json_value.h"

#include <utility>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

TEST(JsonValueTest, StartsNullAndHoldsWhatItIsGiven) {
  JsonValue value;
  EXPECT_TRUE(value->is_null());
  *value = {{"key", 1}};  // nlohmann's object, not an array of the braces
  EXPECT_TRUE(value->is_object());
  EXPECT_EQ((*value)["key"], 1);
  const JsonValue from(nlohmann::json::array({1, 2}));
  EXPECT_EQ(from->size(), 2u);
}

TEST(JsonValueTest, CopiesAreDeep) {
  JsonValue a(nlohmann::json{{"x", 1}});
  JsonValue b = a;
  (*b)["x"] = 2;
  EXPECT_EQ((*a)["x"], 1);
  EXPECT_EQ((*b)["x"], 2);
  a = b;
  (*b)["x"] = 3;
  EXPECT_EQ((*a)["x"], 2);
}

TEST(JsonValueTest, AMovedFromValueIsNullAndUsable) {
  JsonValue a(nlohmann::json{{"x", 1}});
  JsonValue b = std::move(a);
  EXPECT_EQ((*b)["x"], 1);
  EXPECT_TRUE(a->is_null());  // NOLINT(bugprone-use-after-move): defined, and the point
  *a = 5;
  EXPECT_EQ(*a, 5);
}

TEST(JsonValueTest, PassesWhereAConstJsonIsWanted) {
  const JsonValue value(nlohmann::json{{"k", "v"}});
  const auto size_of = [](const nlohmann::json& j) { return j.size(); };
  EXPECT_EQ(size_of(value), 1u);
}

}  // namespace
}  // namespace pstrain
