// Where the tests find their files. The absolute paths are compiled into paths.cpp alone, so no
// other test object depends on where the checkout lies: a clone in another folder (CI's) gets
// ccache hits for every test file but that one.
#pragma once

#include <string>

namespace spillway::test_paths {

// ../shared/testdata beside the checkout: the reference data (models, golden outputs, vocabs).
const std::string& testdata();
// testdata() + "/" + relative.
std::string testdata(const std::string& relative);
// The checkout's root (models/eval, tests/data, bench/, the fuzz corpus).
const std::string& source();
// The build tree: where tests write their scratch files.
const std::string& binary();

}  // namespace spillway::test_paths
