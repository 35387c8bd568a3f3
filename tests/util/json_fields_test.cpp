// Writing files through a temporary and a rename; checking a path is writable before a long run.
#include "placer/util/json_fields.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "placer/util/error.hpp"

namespace placer {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("placer_util_test_" + name)).string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(WriteTextFile, ReplacesTheFileWholeAndLeavesNoTemporary) {
  const std::string path = temp_path("replace.csv");
  write_text_file(path, "a,b\n1,2\n", "test");
  write_text_file(path, "a,b\n3,4\n", "test");
  EXPECT_EQ(slurp(path), "a,b\n3,4\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove(path);
}

TEST(WriteTextFile, AFailedWriteIsAnErrorAndKeepsTheOldFile) {
  EXPECT_THAT([] { write_text_file("/dev/full", "x", "learning curve"); },
              ThrowsMessage<Error>(HasSubstr("failed writing learning curve file '/dev/full'")));
  const std::string path = temp_path("no_such_dir/x.csv");
  EXPECT_THAT([&] { write_text_file(path, "x", "learning curve"); },
              ThrowsMessage<Error>(HasSubstr("cannot write learning curve file")));
}

TEST(WriteJsonFile, WritesOneDocumentAndANewline) {
  const std::string path = temp_path("doc.json");
  write_json_file(path, nlohmann::json{{"a", 1}}, "test", -1);
  EXPECT_EQ(slurp(path), "{\"a\":1}\n");
  std::filesystem::remove(path);
}

TEST(CheckWritable, RemovesTheFileItCreatedAndNamesAPathItCannotWrite) {
  const std::string path = temp_path("probe.json");
  std::filesystem::remove(path);
  check_writable(path, "the checkpoint");
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_THAT([] { check_writable("/nonexistent-dir/x.json", "the checkpoint"); },
              ThrowsMessage<Error>(HasSubstr("cannot write the checkpoint '/nonexistent-dir/x.json'")));
}

}  // namespace
}  // namespace placer
