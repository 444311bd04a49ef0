# Install and package (README §Install, docs/install.md).
#   cmake --install build --prefix PREFIX      PREFIX/bin/shardproof and PREFIX/share/shardproof/{configs,data,
#                                              examples,python}
#   make install [PREFIX=/usr/local]           the same through the Makefile
#   make package                               build/shardproof_<version>_<arch>.deb (CPack, DEB generator)
# The binary finds its data relative to itself, bin/../share/shardproof (src/cli/run_setup.h default_root),
# so the prefix can be anything and can be moved as a whole. The report's assets (Chart.js, its script and
# style) are compiled into the binary (src/report/CMakeLists.txt): nothing of them is installed.
# Paths are fixed as bin/ and share/ (not GNUInstallDirs' variables): the binary's rule is ../share.

install(TARGETS shardproof RUNTIME DESTINATION bin)
# Presets and cluster presets; this-host.toml describes the machine that measured it, never a package's.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/configs/ DESTINATION share/shardproof/configs
        PATTERN this-host.toml EXCLUDE)
# The bundled corpus with its sources file, licences and origin (data/SOURCES.md), the planted test
# material and the published tables; data/tools rebuilds the corpus from Debian packages and is not needed.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/data/ DESTINATION share/shardproof/data PATTERN tools EXCLUDE)
# The labs' own inputs: the DeepSpeed and Hugging Face files of LSL-L/M/N and the PyTorch example with its
# recorder that LSL-P runs (examples/torch/train_llama.py finds python/ as ../../python).
install(DIRECTORY ${CMAKE_SOURCE_DIR}/examples/ DESTINATION share/shardproof/examples PATTERN __pycache__ EXCLUDE)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/python/ DESTINATION share/shardproof/python PATTERN __pycache__ EXCLUDE)
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION share/doc/shardproof)

# The Debian package. Its library dependencies are computed by dpkg-shlibdeps from the binary itself
# (libopenblas, libopenmpi, libdnnl, libfmt, libssl, libxxhash, libgomp, libsentencepiece, ...); mpirun is a
# program, not a library, so openmpi-bin is named. A package for other machines is built with
# -DSP_NATIVE=OFF (the default tunes for the build machine's CPU, README §Install).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME shardproof)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "trains LLaMA-style models with every parallel strategy and proves each computes what one device does")
set(CPACK_PACKAGE_CONTACT "shardproof maintainers <shardproof@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "openmpi-bin")
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/package)
include(CPack)
