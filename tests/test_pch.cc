// The anchor of convoy_test_pch, whose precompiled header the tests share (tests/CMakeLists.txt).
