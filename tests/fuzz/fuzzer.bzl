"""pstrain_fuzzer: one libFuzzer target, built two ways.

For a target NAME with sources defining LLVMFuzzerTestOneInput:
  NAME              the fuzzer: under --config=fuzz (clang, -fsanitize=fuzzer) libFuzzer's
                    own main; in any other build a plain driver that runs the inputs
                    (files, or every file of the folders) given as arguments.
  NAME_corpus_test  a test of every build: the driver runs the seed corpus
                    (corpus/NAME/), so each seed still parses without a crash or a
                    sanitizer report wherever the suite runs.
"""

def pstrain_fuzzer(name, srcs, deps = []):
    native.cc_library(
        name = name + "_lib",
        testonly = True,
        srcs = srcs,
        deps = deps + ["//third_party:absl"],
        alwayslink = True,
    )
    native.cc_binary(
        name = name,
        testonly = True,
        linkopts = select({
            ":fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        deps = [":" + name + "_lib"] + select({
            ":fuzzing": [],
            "//conditions:default": [":standalone_main"],
        }),
    )
    native.cc_test(
        name = name + "_corpus_test",
        size = "small",
        args = ["tests/fuzz/corpus/" + name],
        # Linked like the fuzzer, into one executable: a target's own sanitizer hooks
        # (keras_file_fuzzer's __asan_default_options) then override the runtime's weak
        # defaults, which they cannot from a shared library.
        linkstatic = True,
        data = native.glob(["corpus/" + name + "/**"]),
        deps = [
            ":" + name + "_lib",
            ":standalone_main",
        ],
    )
