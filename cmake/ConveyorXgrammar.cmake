# xgrammar's C++ core (the grammar engine of structured outputs) as the static library
# `xgrammar`, from the source that scripts/fetch-xgrammar.sh puts in third_party/xgrammar/.
#
# The target is defined here instead of through xgrammar's own CMakeLists.txt, which builds its
# Python bindings unless a config.cmake says otherwise and prepends -Werror and -flto=auto to
# CMAKE_CXX_FLAGS (clang 14, which builds the sanitizer and fuzz trees, refuses -flto=auto).
# Here the sources get the project's compile options (sanitizers, coverage for fuzzing) and no
# warnings of their own; their include directories are SYSTEM, so nothing of theirs reaches
# Conveyor's warnings either.
set(CONVEYOR_XGRAMMAR_DIR "${CMAKE_SOURCE_DIR}/third_party/xgrammar" CACHE PATH
    "xgrammar's source (scripts/fetch-xgrammar.sh)")
if(NOT EXISTS "${CONVEYOR_XGRAMMAR_DIR}/include/xgrammar/xgrammar.h")
  message(FATAL_ERROR "xgrammar's source is missing at ${CONVEYOR_XGRAMMAR_DIR}: run "
                      "scripts/setup.sh or scripts/fetch-xgrammar.sh (it fetches it from PyPI)")
endif()
file(GLOB_RECURSE conveyor_xgrammar_sources CONFIGURE_DEPENDS "${CONVEYOR_XGRAMMAR_DIR}/cpp/*.cc")
# The bindings for the Python and TVM FFIs are not part of the C++ core.
list(FILTER conveyor_xgrammar_sources EXCLUDE REGEX "/cpp/(tvm_ffi|nanobind)/")
add_library(xgrammar STATIC ${conveyor_xgrammar_sources})
target_include_directories(xgrammar SYSTEM PUBLIC
  "${CONVEYOR_XGRAMMAR_DIR}/include"
  "${CONVEYOR_XGRAMMAR_DIR}/3rdparty/picojson"
  "${CONVEYOR_XGRAMMAR_DIR}/3rdparty/dlpack/include")
target_compile_definitions(xgrammar PUBLIC XGRAMMAR_ENABLE_CPPTRACE=0
                                           XGRAMMAR_ENABLE_INTERNAL_CHECK=0)
target_compile_options(xgrammar PRIVATE -w)
target_link_libraries(xgrammar PUBLIC Threads::Threads)
