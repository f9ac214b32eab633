// A `.keras` file as a job spec's "model": "x.keras" reads it (ReadKerasFile: libzip, then
// config.json, then model.weights.h5 through Debian's libhdf5). Each input is read two ways:
//   - its parts (split at "\n--\n") are config.json and model.weights.h5, written with
//     Keras's metadata.json as a well-formed archive, so the mutations reach the JSON and
//     the HDF5 image (a zip's CRC would refuse most of them before);
//   - the raw bytes are the archive itself (libzip on anything).
// A file that reads gives one tensor per variable of the model its config builds, with that
// variable's shape; those weights written back (WriteKerasWeightsH5) read back bit for bit.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/checkpoint/keras_import.h"
#include "common/checkpoint/keras_weights_h5.h"
#include "common/checkpoint/zip_archive.h"
#include "common/model/model.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

void CheckWhatWasRead(const pstrain::KerasModelFile& file) {
  absl::StatusOr<std::unique_ptr<pstrain::Model>> model =
      pstrain::Model::FromKerasJson(file.model, /*backend=*/nullptr);
  if (!model.ok()) std::abort();  // ReadKerasFile built it once already
  const std::vector<pstrain::VariableSpec>& variables = (*model)->variables();
  if (variables.size() != file.weights.size()) std::abort();
  for (size_t i = 0; i < variables.size(); ++i) {
    if (file.weights[i].shape() != variables[i].shape) std::abort();
  }

  // The same weights through the writer and the reader again: bit for bit.
  const std::vector<std::string> paths = pstrain::KerasLayerPaths(**model);
  std::vector<pstrain::KerasSaveableWeights> objects;
  std::vector<pstrain::KerasSaveableShapes> shapes;
  for (const std::string& path : paths) {
    objects.push_back({path, {}});
    shapes.push_back({path, {}});
  }
  for (size_t i = 0; i < variables.size(); ++i) {
    objects.at(variables[i].layer).variables.push_back(&file.weights[i]);
    shapes.at(variables[i].layer).shapes.push_back(variables[i].shape);
  }
  absl::StatusOr<std::string> image = pstrain::WriteKerasWeightsH5(objects);
  if (!image.ok()) std::abort();
  absl::StatusOr<std::vector<std::vector<pstrain::Tensor>>> back =
      pstrain::ReadKerasWeightsH5(*image, shapes);
  if (!back.ok()) std::abort();
  size_t i = 0;
  for (const std::vector<pstrain::Tensor>& layer : *back) {
    for (const pstrain::Tensor& t : layer) {
      const pstrain::Tensor& original = file.weights.at(i++);
      if (t.shape() != original.shape()) std::abort();
      if (t.num_elements() > 0 &&
          std::memcmp(t.data(), original.data(), sizeof(float) * t.num_elements()) != 0) {
        std::abort();
      }
    }
  }
  if (i != file.weights.size()) std::abort();
}

void ReadAndCheck(const std::string& path) {
  absl::StatusOr<pstrain::KerasModelFile> file = pstrain::ReadKerasFile(path);
  if (file.ok()) CheckWhatWasRead(*file);
}

}  // namespace

// Debian's libhdf5 mallocs whatever size a corrupt file names (a local heap of
// 0x6c61636f6c367453 bytes: corpus/keras_file_fuzzer/huge_local_heap.bin) and mostly
// handles the NULL glibc's malloc returns for it; AddressSanitizer would abort there
// instead, so here it returns NULL as well, and the library's reading child (forked from
// this process, keras_weights_h5.cc) behaves as it does in production. Our own allocations go through operator new, which still fails
// loudly. (Read by ASan or TSan at start: the fuzzer, and the corpus test under
// --config=asan or tsan.)
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
extern "C" const char* __tsan_default_options() { return "allocator_may_return_null=1"; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::string parts[2];
  pstrain::SplitFuzzInput(bytes, 2, parts);
  const std::string built = pstrain::FuzzScratchDir() + "/built.keras";
  if (!pstrain::WriteZipArchive(built, {{"metadata.json", R"({"keras_version": "3.3.3"})"},
                                         {"config.json", parts[0]},
                                         {"model.weights.h5", parts[1]}})
           .ok()) {
    std::abort();
  }
  ReadAndCheck(built);
  ReadAndCheck(pstrain::WriteFuzzFile("raw.keras", bytes));
  return 0;
}
