#include "common/data/npy_reader.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A version-1 .npy file as numpy.save writes it (header padded to a multiple of 64).
std::string Npy(const std::string& descr, const std::string& shape, const void* data, size_t bytes,
                const std::string& order = "False") {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(data), bytes);
  return out;
}

std::string Write(const std::string& name, const std::string& bytes) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  return path;
}

TEST(NpyReaderTest, ReadsEachDtype) {
  const float f4[] = {1.5f, 2, 3, 4, 5, 6};
  absl::StatusOr<Tensor> t = ReadNpy(Write("f4.npy", Npy("<f4", "(2, 3)", f4, sizeof(f4))));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ShapeString(), "[2,3]");
  EXPECT_THAT(t->values(), ElementsAre(1.5, 2, 3, 4, 5, 6));

  const double f8[] = {0.25, -1};
  t = ReadNpy(Write("f8.npy", Npy("<f8", "(2,)", f8, sizeof(f8))));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->values(), ElementsAre(0.25, -1));

  const uint8_t u1[] = {0, 255};
  t = ReadNpy(Write("u1.npy", Npy("|u1", "(2,)", u1, sizeof(u1))));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->values(), ElementsAre(0, 255));

  const int64_t i8[] = {7, -3};
  t = ReadNpy(Write("i8.npy", Npy("<i8", "(2,)", i8, sizeof(i8))));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->values(), ElementsAre(7, -3));
}

TEST(NpyReaderTest, Dataset) {
  const uint8_t x[] = {0, 255, 51, 102, 1, 2, 3, 4};  // (2, 2, 2) images
  const int64_t y[] = {1, 0};
  absl::StatusOr<Dataset> data =
      ReadNpyDataset(Write("x.npy", Npy("|u1", "(2, 2, 2)", x, sizeof(x))),
                     Write("y.npy", Npy("<i8", "(2,)", y, sizeof(y))), 1.0f / 255.0f);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->x.ShapeString(), "[2,4]");
  EXPECT_FLOAT_EQ(data->x.values()[1], 1.0f);
  EXPECT_EQ(data->num_classes, 2);

  const int64_t three[] = {0, 1, 2};
  absl::Status mismatch = ReadNpyDataset(Write("x2.npy", Npy("|u1", "(2, 2, 2)", x, sizeof(x))),
                                         Write("y3.npy", Npy("<i8", "(3,)", three, sizeof(three))))
                              .status();
  EXPECT_THAT(std::string(mismatch.message()), HasSubstr("2 rows but"));
}

TEST(NpyReaderTest, Rejects) {
  const float f4[] = {1, 2};
  auto message = [](const std::string& path) {
    absl::Status status = ReadNpy(path).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    return std::string(status.message());
  };
  EXPECT_THAT(message(Write("be.npy", Npy(">f4", "(2,)", f4, 8))), HasSubstr("unsupported dtype"));
  EXPECT_THAT(message(Write("i4.npy", Npy("<i4", "(2,)", f4, 8))), HasSubstr("unsupported dtype"));
  EXPECT_THAT(message(Write("fo.npy", Npy("<f4", "(2,)", f4, 8, "True"))),
              HasSubstr("Fortran order"));
  EXPECT_THAT(message(Write("short.npy", Npy("<f4", "(3,)", f4, 8))),
              HasSubstr("does not match shape"));
  EXPECT_THAT(message(Write("huge.npy", Npy("<f4", "(100000000000,)", f4, 8))),
              HasSubstr("too large"));
  EXPECT_THAT(message(Write("magic.npy", "not numpy at all")), HasSubstr("bad magic"));
  EXPECT_EQ(ReadNpy("/nonexistent.npy").status().code(), absl::StatusCode::kNotFound);
}

// NaN and Inf in NPY data trained to "loss: -nan": refused at load, naming the element
// and its row in file order.
TEST(NpyReaderTest, NonFiniteValuesAreRefusedNamingTheRow) {
  const float f4[] = {1, 2, 3, 4, NAN, 6};
  absl::Status status = ReadNpy(Write("nan4.npy", Npy("<f4", "(3, 2)", f4, sizeof(f4)))).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("element 4 (row 2, in file order) is nan"));
  const double f8[] = {1, -INFINITY};
  EXPECT_THAT(std::string(ReadNpy(Write("inf8.npy", Npy("<f8", "(2,)", f8, sizeof(f8))))
                              .status()
                              .message()),
              HasSubstr("element 1 (row 1, in file order)"));
  // A float64 beyond a float: its conversion would be undefined.
  const double big[] = {1e300};
  EXPECT_EQ(ReadNpy(Write("big8.npy", Npy("<f8", "(1,)", big, sizeof(big)))).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A NaN label (y file) is refused the same way.
  const uint8_t x[] = {1, 2};
  const float y[] = {0, NAN};
  absl::Status label = ReadNpyDataset(Write("xl.npy", Npy("|u1", "(2, 1)", x, sizeof(x))),
                                      Write("yl.npy", Npy("<f4", "(2,)", y, sizeof(y))))
                           .status();
  EXPECT_THAT(std::string(label.message()), HasSubstr("yl.npy"));
  EXPECT_THAT(std::string(label.message()), HasSubstr("row 1"));
}

TEST(NpyReaderTest, NotARegularFileIsRefused) {
  absl::Status status = ReadNpy("/dev/zero").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("not a regular file"));
}

}  // namespace
}  // namespace pstrain
