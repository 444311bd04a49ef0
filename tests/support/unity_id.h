// SP_TEST_ID: a name unique to each unit-test file where several are compiled as one translation unit (CMake's
// UNITY_BUILD_UNIQUE_ID, tests/CMakeLists.txt), and empty otherwise. Each test file wraps its anonymous namespace's
// contents in `namespace SP_TEST_ID`, so that two files' helpers of the same name do not collide in one unit.
// No include guard: it only defines the name where CMake has not.
#ifndef SP_TEST_ID
#define SP_TEST_ID
#endif
