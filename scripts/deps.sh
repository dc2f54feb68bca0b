#!/usr/bin/env bash
# Install what minic needs on Debian 12 (CMake, cmocka, LLVM 14, xxHash, protobuf-c) when it is
# missing. libprotobuf-c-dev + protobuf-c-compiler: ONNX import (protoc-c generates the reader
# at build time); python3-onnx + python3-numpy: the ONNX node tests (tests/onnx_node/) are
# generated from Debian's onnx package when the suite runs.
# libxxhash-dev: the compile cache verifies its entries with XXH3-128 (without it, no cache).
# CUDA 13 is expected at /usr/local/cuda (headers; its libraries are loaded at run time).
set -euo pipefail
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v cc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
command -v pkg-config >/dev/null || need+=(pkg-config)
dpkg -s libcmocka-dev >/dev/null 2>&1 || need+=(libcmocka-dev)
dpkg -s libxxhash-dev >/dev/null 2>&1 || need+=(libxxhash-dev)
dpkg -s libprotobuf-c-dev >/dev/null 2>&1 || need+=(libprotobuf-c-dev)
command -v protoc-c >/dev/null || need+=(protobuf-c-compiler)
dpkg -s python3-onnx >/dev/null 2>&1 || need+=(python3-onnx)
dpkg -s python3-numpy >/dev/null 2>&1 || need+=(python3-numpy)
dpkg -s llvm-14-dev >/dev/null 2>&1 || need+=(llvm-14-dev)
command -v clang-14 >/dev/null || need+=(clang-14)
dpkg -s libclang-rt-14-dev >/dev/null 2>&1 || need+=(libclang-rt-14-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "deps: installing ${need[*]}" >&2
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
