#include "common/sharding/shards_by_ps.h"

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::vector<float> Values(const Tensor& t) { return {t.values().begin(), t.values().end()}; }

Tensor Iota(std::vector<int64_t> shape, float start) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data()[i] = start + static_cast<float>(i);
  return t;
}

// "k" [5,2] split in two shards (rows 0-2 on ps 1, rows 3-4 on ps 0) and "b" [2] whole on
// ps 1, as three ps tasks would hold them (ps 2 holds nothing).
class ShardsByPsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<VariableShape> model = {{"k", {5, 2}}, {"b", {2}}};
    std::vector<VariablePlacementEntry> placement = SplitIntoShards(model[0], 2);
    placement[0].set_ps_index(1);
    placement[1].set_ps_index(0);
    placement.push_back(SplitIntoShards(model[1], 1)[0]);
    placement.back().set_ps_index(1);
    auto layout = ResolveLayout(model, placement, 3);
    ASSERT_TRUE(layout.ok()) << layout.status();
    layout_ = *std::move(layout);
    full_ = {Iota({5, 2}, 0), Iota({2}, 100)};
  }

  std::vector<VariableLayout> layout_;
  std::vector<Tensor> full_;
};

TEST_F(ShardsByPsTest, GroupsShardsByPsInLayoutOrder) {
  auto by_ps = ShardsByPs(layout_, 3);
  ASSERT_EQ(by_ps.size(), 3u);
  EXPECT_EQ(ShardNames(by_ps[0]), (std::vector<std::string>{"k/part_1"}));
  EXPECT_EQ(ShardNames(by_ps[1]), (std::vector<std::string>{"k/part_0", "b"}));
  EXPECT_TRUE(by_ps[2].empty());
  EXPECT_EQ(by_ps[1][1].variable, 1);
}

TEST_F(ShardsByPsTest, ScatterThenGatherGivesTheValuesBack) {
  auto per_ps = ScatterValues(layout_, 3, full_);
  ASSERT_TRUE(per_ps.ok()) << per_ps.status();
  ASSERT_EQ((*per_ps)[0].size(), 1u);
  EXPECT_EQ(Values((*per_ps)[0][0].tensor), (std::vector<float>{6, 7, 8, 9}));
  std::map<std::string, Tensor> stored;
  for (const auto& shards : *per_ps) {
    for (const NamedTensor& s : shards) stored[s.name] = s.tensor;
  }
  // GatherValues reads every ps at once, one thread each (TSan found the unguarded
  // push_back racing).
  absl::Mutex mu;
  std::vector<int> asked;
  auto gathered = GatherValues(layout_, 3, [&](int ps, const std::vector<std::string>& names)
                                               -> absl::StatusOr<std::vector<Tensor>> {
    {
      absl::MutexLock lock(&mu);
      asked.push_back(ps);
    }
    std::vector<Tensor> values;
    for (const std::string& name : names) values.push_back(stored.at(name));
    return values;
  });
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  EXPECT_EQ(asked.size(), 2u);  // ps 2 holds nothing and is not read
  ASSERT_EQ(gathered->size(), 2u);
  EXPECT_EQ(Values((*gathered)[0]), Values(full_[0]));
  EXPECT_EQ(Values((*gathered)[1]), Values(full_[1]));
}

TEST_F(ShardsByPsTest, GatherFailsOnAFailedReadOrAWrongAnswer) {
  auto failed = GatherValues(layout_, 3, [](int ps, const std::vector<std::string>&)
                                             -> absl::StatusOr<std::vector<Tensor>> {
    if (ps == 1) return absl::UnavailableError("ps task 1 (x:1): down");
    return std::vector<Tensor>{Tensor({2, 2})};
  });
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(failed.status().message(), "ps task 1 (x:1): down");
  auto short_answer = GatherValues(layout_, 3, [](int, const std::vector<std::string>&)
                                                   -> absl::StatusOr<std::vector<Tensor>> {
    return std::vector<Tensor>{Tensor({2, 2})};
  });
  EXPECT_EQ(short_answer.status().code(), absl::StatusCode::kInternal);
  auto wrong_shape = GatherValues(layout_, 3, [](int, const std::vector<std::string>& names)
                                                  -> absl::StatusOr<std::vector<Tensor>> {
    return std::vector<Tensor>(names.size(), Tensor({1}));
  });
  EXPECT_EQ(wrong_shape.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ShardsByPsTest, StatesScatterAndGatherWithTheirSlots) {
  std::vector<VariableSnapshot> states(2);
  for (int i = 0; i < 2; ++i) {
    states[i].name = layout_[i].name;
    states[i].value = full_[i];
    states[i].iterations = 7 + i;
    states[i].version = 9 + i;
    states[i].slots.push_back({"m", Iota(layout_[i].shape, 50)});
    states[i].slots.push_back({"v", Iota(layout_[i].shape, 80)});
  }
  auto per_ps = ScatterStates(layout_, 3, states);
  ASSERT_TRUE(per_ps.ok()) << per_ps.status();
  ASSERT_EQ((*per_ps)[0].size(), 1u);
  const VariableSnapshot& part1 = (*per_ps)[0][0];
  EXPECT_EQ(part1.name, "k/part_1");
  EXPECT_EQ(part1.iterations, 7);
  ASSERT_EQ(part1.slots.size(), 2u);
  EXPECT_EQ(Values(part1.slots[0].tensor), (std::vector<float>{56, 57, 58, 59}));
  std::map<std::string, VariableSnapshot> stored;
  for (const auto& shards : *per_ps) {
    for (const VariableSnapshot& s : shards) stored[s.name] = s;
  }
  // One shard missed a push: the larger count is kept.
  stored["k/part_0"].iterations = 6;
  auto read = [&](int, const std::vector<std::string>& names)
      -> absl::StatusOr<std::vector<VariableSnapshot>> {
    std::vector<VariableSnapshot> out;
    for (const std::string& name : names) out.push_back(stored.at(name));
    return out;
  };
  auto gathered = GatherStates(layout_, 3, read);
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  ASSERT_EQ(gathered->size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const VariableSnapshot& g = (*gathered)[i];
    EXPECT_EQ(g.name, states[i].name);
    EXPECT_EQ(Values(g.value), Values(states[i].value));
    EXPECT_EQ(g.iterations, states[i].iterations);
    EXPECT_EQ(g.version, states[i].version);
    ASSERT_EQ(g.slots.size(), 2u);
    EXPECT_EQ(g.slots[1].name, "v");
    EXPECT_EQ(Values(g.slots[1].tensor), Values(states[i].slots[1].tensor));
  }
  // Shards of one variable that keep different slots cannot be put together.
  stored["k/part_0"].slots.pop_back();
  EXPECT_EQ(GatherStates(layout_, 3, read).status().code(), absl::StatusCode::kInternal);
  // Nor can an answer for another shard than asked.
  auto wrong_name = GatherStates(layout_, 3, [&](int, const std::vector<std::string>& names)
                                                 -> absl::StatusOr<std::vector<VariableSnapshot>> {
    std::vector<VariableSnapshot> out(names.size());
    for (size_t k = 0; k < names.size(); ++k) out[k].name = absl::StrCat(names[k], "x");
    return out;
  });
  EXPECT_EQ(wrong_name.status().code(), absl::StatusCode::kInternal);
}

TEST_F(ShardsByPsTest, ScatterRejectsWhatDoesNotFit) {
  EXPECT_EQ(ScatterValues(layout_, 3, {full_[0]}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ScatterValues(layout_, 3, {full_[0], Tensor({3})}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ScatterValues(layout_, 3, {Tensor({4, 2}), full_[1]}).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<VariableSnapshot> states(2);
  states[0].value = full_[0];
  states[0].slots.push_back({"m", Tensor({5, 3})});
  states[1].value = full_[1];
  EXPECT_EQ(ScatterStates(layout_, 3, states).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain
