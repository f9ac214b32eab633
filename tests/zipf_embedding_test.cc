// examples/zipf_embedding.json (a 1,000,000 x 64 Embedding on Zipf-distributed ids from
// common/data/zipf_ids.h) on an in-process parameter-server cluster of 2 ps and 2
// workers: the table is split by rows over both ps, the workers move only the rows their
// batches use, and a short run already learns the ids' classes. The example's full run
// and its accuracy are in README.md.

#include <fstream>
#include <sstream>
#include <string>

#include "chief/chief_task.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cluster_test_util.h"
#include "tests/in_process_cluster.h"

namespace pstrain {
namespace {

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str(), nullptr, false);
}

TEST(ZipfEmbeddingTest, TheExampleLearnsOnAParameterServerCluster) {
  nlohmann::json job = ReadJson("examples/zipf_embedding.json");
  ASSERT_FALSE(job.is_discarded()) << "examples/zipf_embedding.json";
  ASSERT_EQ(job["model"]["config"]["layers"][1]["config"]["input_dim"], 1000000);
  job["fit"]["epochs"] = 1;
  job["fit"]["steps_per_epoch"] = 300;
  job["data"]["validation"]["samples"] = 4000;
  const std::string dir = FreshTestDir("zipf_embedding");
  const std::string job_path = dir + "/job.json";
  std::ofstream(job_path) << job.dump();
  ChiefOptions chief;
  chief.job_path = job_path;
  std::ostringstream out;
  const std::vector<int> exit_codes = RunInProcessCluster(LoopbackCluster(2, 2), chief, out);
  for (size_t i = 0; i < exit_codes.size(); ++i) EXPECT_EQ(exit_codes[i], 0) << "task " << i;
  // 300 steps of 256 examples (77k of the 200k) gave 0.89 here (asynchronous: it varies a
  // little); chance is 0.1 and a model knowing every id's class gets about 0.99. The full
  // 3 epochs reach the README's figure.
  EXPECT_GE(LastValAccuracy(out.str()), 0.75) << out.str();
}

// examples/zipf_embedding_large.json (issue 25's done-when job: a 4,000,000 x 64 table, 1 GB
// of floats, over 4 ps) is this example with the table and the ids' vocabulary 4 times
// larger and nothing else changed: the same model, optimizer and data settings, so what
// this file's other test checks holds for it too (its own run and accuracy target are in
// README "Large embeddings").
TEST(ZipfEmbeddingTest, TheLargeExampleIsTheSameJobWithAFourMillionRowTable) {
  nlohmann::json large = ReadJson("examples/zipf_embedding_large.json");
  ASSERT_FALSE(large.is_discarded()) << "examples/zipf_embedding_large.json";
  nlohmann::json job = ReadJson("examples/zipf_embedding.json");
  ASSERT_FALSE(job.is_discarded());
  job["model"]["config"]["name"] = "zipf_embedding_large";
  job["model"]["config"]["layers"][1]["config"]["input_dim"] = 4000000;
  job["data"]["train"]["vocabulary"] = 4000000;
  job["data"]["validation"]["vocabulary"] = 4000000;
  EXPECT_EQ(large, job) << nlohmann::json::diff(job, large).dump(1);
}

}  // namespace
}  // namespace pstrain
