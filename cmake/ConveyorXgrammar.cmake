# xgrammar's C++ core (the grammar engine of structured outputs) as the static library
# `xgrammar`, from the source that scripts/fetch-xgrammar.sh puts in third_party/xgrammar/.
#
# The target is defined here instead of through xgrammar's own CMakeLists.txt, which builds its
# Python bindings unless a config.cmake says otherwise and prepends -Werror and -flto=auto to
# CMAKE_CXX_FLAGS (clang 14, which builds the sanitizer and fuzz trees, refuses -flto=auto).
# Here the sources get the project's compile options (sanitizers, coverage for fuzzing) and no
# warnings of their own; their include directories are SYSTEM, so nothing of theirs reaches
# Conveyor's warnings either.
#
# The library does not change with a clone, only with xgrammar's version (and Conveyor's
# patches), the compiler and the flags: it is kept in ${XDG_CACHE_HOME:-~/.cache}/conveyor/ under
# a hash of those (CONVEYOR_XGRAMMAR_CACHE; empty turns the cache off). A tree whose key is there
# links the cached library; otherwise it compiles the sources and, once built, stores the library
# there (written under another name, then renamed; a stamp beside it holds its sha256, so a
# half-written or altered library is noticed at the next configure and built again).
set(CONVEYOR_XGRAMMAR_DIR "${CMAKE_SOURCE_DIR}/third_party/xgrammar" CACHE PATH
    "xgrammar's source (scripts/fetch-xgrammar.sh)")
if(NOT EXISTS "${CONVEYOR_XGRAMMAR_DIR}/include/xgrammar/xgrammar.h")
  message(FATAL_ERROR "xgrammar's source is missing at ${CONVEYOR_XGRAMMAR_DIR}: run "
                      "scripts/setup.sh or scripts/fetch-xgrammar.sh (it fetches it from PyPI)")
endif()
if(DEFINED ENV{XDG_CACHE_HOME} AND NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
  set(_conveyor_cache_home "$ENV{XDG_CACHE_HOME}")
else()
  set(_conveyor_cache_home "$ENV{HOME}/.cache")
endif()
set(CONVEYOR_XGRAMMAR_CACHE "${_conveyor_cache_home}/conveyor" CACHE PATH
    "Where built xgrammar libraries are kept across clones (empty: not kept)")

# The key: the source's version stamp, the compiler, and every flag its sources are compiled
# with (the folders of this tree and checkout replaced by placeholders: the sanitizer trees map
# them out of the objects' line tables).
file(READ "${CONVEYOR_XGRAMMAR_DIR}/.conveyor-version" _xgrammar_stamp)
string(STRIP "${_xgrammar_stamp}" _xgrammar_stamp)
string(TOUPPER "${CMAKE_BUILD_TYPE}" _xgrammar_config)
get_directory_property(_xgrammar_options COMPILE_OPTIONS)
set(_xgrammar_key_text "${_xgrammar_stamp}|${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}|"
    "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${_xgrammar_config}}|${_xgrammar_options}|"
    "c++${CMAKE_CXX_STANDARD} pic ${CMAKE_POSITION_INDEPENDENT_CODE}")
string(REPLACE "${CMAKE_BINARY_DIR}" "<build>" _xgrammar_key_text "${_xgrammar_key_text}")
string(REPLACE "${CMAKE_SOURCE_DIR}" "<source>" _xgrammar_key_text "${_xgrammar_key_text}")
string(SHA256 _xgrammar_key "${_xgrammar_key_text}")
string(SUBSTRING "${_xgrammar_key}" 0 16 _xgrammar_key)
set(_xgrammar_cached "")
if(CONVEYOR_XGRAMMAR_CACHE)
  set(_xgrammar_cached "${CONVEYOR_XGRAMMAR_CACHE}/xgrammar-${_xgrammar_stamp}-${_xgrammar_key}")
endif()

set(_xgrammar_hit OFF)
if(_xgrammar_cached AND EXISTS "${_xgrammar_cached}/libxgrammar.a"
   AND EXISTS "${_xgrammar_cached}/libxgrammar.a.sha256")
  file(READ "${_xgrammar_cached}/libxgrammar.a.sha256" _xgrammar_expected)
  string(STRIP "${_xgrammar_expected}" _xgrammar_expected)
  file(SHA256 "${_xgrammar_cached}/libxgrammar.a" _xgrammar_actual)
  if(_xgrammar_expected STREQUAL _xgrammar_actual)
    set(_xgrammar_hit ON)
  else()
    message(STATUS "xgrammar: ${_xgrammar_cached}/libxgrammar.a does not match its stamp: "
                   "building it again")
  endif()
endif()

if(_xgrammar_hit)
  message(STATUS "xgrammar: ${_xgrammar_stamp} from ${_xgrammar_cached}")
  add_library(xgrammar STATIC IMPORTED GLOBAL)
  set_target_properties(xgrammar PROPERTIES IMPORTED_LOCATION "${_xgrammar_cached}/libxgrammar.a")
else()
  file(GLOB_RECURSE conveyor_xgrammar_sources CONFIGURE_DEPENDS
       "${CONVEYOR_XGRAMMAR_DIR}/cpp/*.cc")
  # The bindings for the Python and TVM FFIs are not part of the C++ core.
  list(FILTER conveyor_xgrammar_sources EXCLUDE REGEX "/cpp/(tvm_ffi|nanobind)/")
  add_library(xgrammar STATIC ${conveyor_xgrammar_sources})
  target_compile_options(xgrammar PRIVATE -w)
  conveyor_unity(xgrammar)
  if(_xgrammar_cached)
    message(STATUS "xgrammar: ${_xgrammar_stamp} built here, then kept in ${_xgrammar_cached}")
    add_custom_command(TARGET xgrammar POST_BUILD
      COMMAND "${CMAKE_COMMAND}" "-DLIBRARY=$<TARGET_FILE:xgrammar>" "-DDEST=${_xgrammar_cached}"
              -P "${CMAKE_CURRENT_LIST_DIR}/store_in_cache.cmake"
      VERBATIM)
  endif()
endif()
# An imported library takes only INTERFACE properties; a built one gives them to its own sources
# too.
if(_xgrammar_hit)
  set(_xgrammar_scope INTERFACE)
else()
  set(_xgrammar_scope PUBLIC)
endif()
target_include_directories(xgrammar SYSTEM ${_xgrammar_scope}
  "${CONVEYOR_XGRAMMAR_DIR}/include"
  "${CONVEYOR_XGRAMMAR_DIR}/3rdparty/picojson"
  "${CONVEYOR_XGRAMMAR_DIR}/3rdparty/dlpack/include")
target_compile_definitions(xgrammar ${_xgrammar_scope} XGRAMMAR_ENABLE_CPPTRACE=0
                                                       XGRAMMAR_ENABLE_INTERNAL_CHECK=0)
target_link_libraries(xgrammar ${_xgrammar_scope} Threads::Threads)
