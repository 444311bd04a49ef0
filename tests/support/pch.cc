// The translation unit that builds the tests' shared precompiled header (tests/CMakeLists.txt,
// sp_test_pch); every test target reuses it. It has no code of its own.
