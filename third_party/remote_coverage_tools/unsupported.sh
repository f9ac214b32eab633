#!/bin/sh
echo "bazel coverage is not supported in pstrain's offline build" >&2
exit 1
