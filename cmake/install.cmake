# Installing and packaging the anuvad executable (included by CMakeLists.txt after the anuvad
# target): the version text's inputs, man pages from each --help (help2man), install() rules
# (binary, man pages, docs, the bundled corpus under share/anuvad/data) and a Debian package
# (cpack -G DEB, dependencies from dpkg-shlibdeps). README "Install".
include(GNUInstallDirs)

# --- anuvad --version (src/cli/build_info.cpp) --------------------------------------------------
# The git revision is looked up at every build (a custom target always runs) and the header is
# rewritten only when it changes, so the binary never reports a stale revision.
find_package(Git QUIET)
set(ANUVAD_GIT_REVISION_HEADER ${PROJECT_BINARY_DIR}/generated/anuvad_git_revision.h)
add_custom_target(anuvad_git_revision
  COMMAND ${CMAKE_COMMAND} -DGIT=${GIT_EXECUTABLE} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
          -DOUT=${ANUVAD_GIT_REVISION_HEADER} -P ${PROJECT_SOURCE_DIR}/cmake/git_revision.cmake
  BYPRODUCTS ${ANUVAD_GIT_REVISION_HEADER}
  COMMENT "Looking up the git revision for anuvad --version")
set(ANUVAD_CORPUS_INSTALL_DIR ${CMAKE_INSTALL_DATADIR}/anuvad/data)
file(RELATIVE_PATH ANUVAD_CORPUS_FROM_BINDIR ${CMAKE_INSTALL_FULL_BINDIR}
     ${CMAKE_INSTALL_FULL_DATADIR}/anuvad/data)
if(ANUVAD_NATIVE)
  set(ANUVAD_BUILT_NATIVE 1)
else()
  set(ANUVAD_BUILT_NATIVE 0)
endif()
target_sources(anuvad PRIVATE ${PROJECT_SOURCE_DIR}/src/cli/build_info.cpp)
set_source_files_properties(${PROJECT_SOURCE_DIR}/src/cli/build_info.cpp PROPERTIES
  COMPILE_DEFINITIONS "ANUVAD_VERSION=\"${PROJECT_VERSION}\";ANUVAD_BUILT_NATIVE=${ANUVAD_BUILT_NATIVE};ANUVAD_CORPUS_FROM_BINDIR=\"${ANUVAD_CORPUS_FROM_BINDIR}\";ANUVAD_CORPUS_INSTALL_DIR=\"${CMAKE_INSTALL_FULL_DATADIR}/anuvad/data\"")
target_include_directories(anuvad PRIVATE ${PROJECT_BINARY_DIR}/generated)
add_dependencies(anuvad anuvad_git_revision)

# --- Man pages: anuvad(1) and anuvad-COMMAND(1) from the --help texts -----------------------------
# (COMMAND "summary for the NAME section") pairs; a new subcommand adds a pair here.
set(ANUVAD_MAN_PAGES
  "anuvad" "English to Hindi transformer translator"
  "train" "train SentencePiece vocabularies and a transformer translation model"
  "translate" "translate English sentences to Hindi"
  "score" "score translations by forced decoding"
  "evaluate" "translate a test corpus and compute BLEU, chrF2, chrF2++ and exact match"
  "attention" "render an attention dump as a self-contained HTML page"
  "report" "render a structured training log as a self-contained HTML report page"
  "average" "average the weights of compatible models")
find_program(HELP2MAN help2man)
set(ANUVAD_MAN_DIR ${PROJECT_BINARY_DIR}/man)
set(ANUVAD_MAN_FILES "")
if(HELP2MAN)
  list(LENGTH ANUVAD_MAN_PAGES n)
  math(EXPR last "${n} - 1")
  foreach(i RANGE 0 ${last} 2)
    math(EXPR j "${i} + 1")
    list(GET ANUVAD_MAN_PAGES ${i} command)
    list(GET ANUVAD_MAN_PAGES ${j} summary)
    if(command STREQUAL "anuvad")
      set(page anuvad)
      set(help_option "--help")
      set(include ${PROJECT_SOURCE_DIR}/cmake/man/anuvad.h2m)
    else()
      set(page anuvad-${command})
      set(help_option "${command} --help")
      set(include ${PROJECT_SOURCE_DIR}/cmake/man/command.h2m)
    endif()
    # --locale=C.UTF-8: help2man's default "C" turns the help's UTF-8 (→, ×) into "?".
    add_custom_command(OUTPUT ${ANUVAD_MAN_DIR}/${page}.1
      COMMAND ${CMAKE_COMMAND} -E make_directory ${ANUVAD_MAN_DIR}
      COMMAND ${HELP2MAN} --locale=C.UTF-8 --no-info --no-discard-stderr "--version-string=${page} ${PROJECT_VERSION}"
              "--help-option=${help_option}" "--name=${summary}" --include=${include}
              --output=${ANUVAD_MAN_DIR}/${page}.1 $<TARGET_FILE:anuvad>
      DEPENDS anuvad ${include}
      COMMENT "Generating the man page ${page}(1) with help2man"
      VERBATIM)
    list(APPEND ANUVAD_MAN_FILES ${ANUVAD_MAN_DIR}/${page}.1)
  endforeach()
  add_custom_target(anuvad_man_pages ALL DEPENDS ${ANUVAD_MAN_FILES})
  install(FILES ${ANUVAD_MAN_FILES} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "help2man not found: man pages are not built (apt-get install help2man)")
endif()

# --- install() ---------------------------------------------------------------------------------
install(TARGETS anuvad RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/data/ DESTINATION ${ANUVAD_CORPUS_INSTALL_DIR})
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})

# --- cpack -G DEB -------------------------------------------------------------------------------
set(ANUVAD_PACKAGE_MAINTAINER "anuvad developers <anuvad@invalid>" CACHE STRING
    "Maintainer field of the Debian package")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME anuvad)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "English to Hindi transformer translator")
set(CPACK_PACKAGE_DESCRIPTION
    "A small encoder-decoder transformer written on Eigen, trained and run from the command line: "
    "train on the bundled corpus or your own, translate with greedy or beam search, score, "
    "evaluate (BLEU, chrF) and look at the attention weights.")
string(JOIN "" CPACK_PACKAGE_DESCRIPTION ${CPACK_PACKAGE_DESCRIPTION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # anuvad_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${ANUVAD_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION text)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # Depends: from the shared libraries it links
# The OpenBLAS build whose folder the binary's RUNPATH names (ANUVAD_OPENBLAS_DIR, core/gemm.h):
# dpkg-shlibdeps only finds the metapackage libopenblas0, whose first alternative is the pthread
# build, so the package that owns that folder's library (e.g. libopenblas0-openmp) is added.
if(DEFINED ANUVAD_OPENBLAS_DIR)
  execute_process(COMMAND dpkg-query -S ${ANUVAD_OPENBLAS_DIR}/libopenblas.so.0
                  OUTPUT_VARIABLE owner RESULT_VARIABLE status
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(status EQUAL 0)
    string(REGEX REPLACE "^([^:]+):.*" "\\1" owner "${owner}")
    set(CPACK_DEBIAN_PACKAGE_DEPENDS "${owner}")
  else()
    message(STATUS "No Debian package owns ${ANUVAD_OPENBLAS_DIR}/libopenblas.so.0: add it to the .deb's Depends by hand")
  endif()
endif()
# A package is installed on other machines: refuse to pack a binary built for this CPU only.
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_BINARY_DIR}/CPackAnuvad.cmake)
if(ANUVAD_NATIVE)
  file(WRITE ${CPACK_PROJECT_CONFIG_FILE} "message(FATAL_ERROR \"anuvad was configured with \
ANUVAD_NATIVE=ON (-march=native): the package would only run on CPUs like this one. Configure \
a separate build with -DANUVAD_NATIVE=OFF to package it.\")\n")
else()
  file(WRITE ${CPACK_PROJECT_CONFIG_FILE} "# ANUVAD_NATIVE=OFF: a portable build.\n")
endif()
include(CPack)
