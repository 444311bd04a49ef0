"""pytest set-up of the package's tests (tests/python/CMakeLists.txt runs each file from ctest on .venv): the
`long` marker (make test-long), and the paths every test shares."""


def pytest_configure(config):
    config.addinivalue_line("markers", "long: a long case, run by make test-long (ctest label long)")
