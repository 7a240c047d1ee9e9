# Sourced by scripts/test.sh and scripts/sanitize.sh: the compiler cache and
# linker their builds use, as CMake arguments in build_speed_flags.
#
# ccache (installed by scripts/install-deps.sh) keys each object by its
# compiler, flags and preprocessed sources, so a fresh clone builds from the
# objects of the last build of the same sources: CI's clone rebuilds only
# what a change touched. CCACHE_BASEDIR and CCACHE_NOHASHDIR let clones in
# different folders share entries; the sloppiness lets it cache objects built
# on the precompiled headers (cmake/PrecompiledHeaders.cmake). The cache is
# ccache's own (~/.cache/ccache unless CCACHE_DIR says otherwise);
# CAIRN_CCACHE=0 builds without it. lld links the 60-odd binaries several
# times faster than ld (the daemon: 2.4 s instead of 11).
build_speed_flags=()
if [ "${CAIRN_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=$PWD
  export CCACHE_NOHASHDIR=true
  export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  build_speed_flags+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
if command -v ld.lld >/dev/null; then
  build_speed_flags+=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld
    -DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld)
fi
