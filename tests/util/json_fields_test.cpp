// Writing files through a temporary and a rename; checking a path is writable before a long run.
#include "placer/util/json_fields.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "placer/util/error.hpp"
#include "placer/util/text.hpp"

namespace placer {
namespace {

using ::testing::AllOf;
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

// A pipe is asked, not opened: opening a FIFO with no reader blocked until one came, which then
// read the probe's close as the end of the file (a QA pass). A directory is named as such.
TEST(CheckWritable, APipeIsNotOpenedAndADirectoryIsNamed) {
  const std::string fifo = temp_path("probe.fifo");
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  check_writable(fifo, "trace file");  // returns at once: no reader is waiting
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  std::filesystem::remove(fifo);
  EXPECT_THAT([] { check_writable("/tmp", "trace file"); }, ThrowsMessage<Error>(HasSubstr("cannot write trace file '/tmp' (a directory)")));
}

// A number too large for a double is placed like a syntax error (the parser's message for it
// gave no line or column).
TEST(ReadJsonFile, ANumberOutOfRangeIsPlaced) {
  const std::string path = temp_path("overflow.json");
  {
    std::ofstream out(path);
    out << "{\n  \"format\": \"placer-cluster\",\n  \"x\": 1e999\n}\n";
  }
  EXPECT_THAT([&] { (void)read_json_file(path, "cluster"); },
              ThrowsMessage<Error>(AllOf(HasSubstr("cluster file '" + path + "' at line 3, column 12: "), HasSubstr("1e999"))));
  std::filesystem::remove(path);
}

// Found by a bad-input sweep: a value nested 60,000 deep crashed every reader (the message that
// named the wrong type printed it, recursing once per level), and a huge value became a message
// of half a megabyte.
TEST(ReadJsonFile, RefusesDeepNestingAndKeepsMessagesShort) {
  const std::string path = temp_path("deep.json");
  {
    std::ofstream out(path);
    out << "{\"format\": " << std::string(60'000, '[') << std::string(60'000, ']') << "}";
  }
  EXPECT_THAT([&] { (void)read_json_file(path, "graph"); }, ThrowsMessage<Error>(HasSubstr("nested deeper than 256 levels")));
  {
    std::ofstream out(path);
    out << "{\"a\": " << std::string(256, '[') << std::string(256, ']') << "}";  // 257 levels, the object's included
  }
  EXPECT_THROW((void)read_json_file(path, "graph"), Error);
  {
    std::ofstream out(path);
    out << "{\"a\": " << std::string(255, '[') << std::string(255, ']') << "}";
  }
  EXPECT_NO_THROW((void)read_json_file(path, "graph"));
  std::filesystem::remove(path);

  EXPECT_EQ(json_excerpt(nlohmann::json::parse("[2, 3.5]")), "[2,3.5]");
  EXPECT_EQ(json_excerpt(nlohmann::json::parse("{}")), "{}");
  EXPECT_EQ(json_excerpt(nlohmann::json::parse("\"\"")), "\"\"");
  EXPECT_EQ(json_excerpt(nlohmann::json::parse("[[1], 2]")), "a list of 2 items");
  EXPECT_EQ(json_excerpt(nlohmann::json::parse(R"({"a": {"b": 1}})")), "an object of 1 field");
  nlohmann::json big = nlohmann::json::array();
  for (int i = 0; i < 100'000; ++i) big.push_back(i);
  EXPECT_EQ(json_excerpt(big), "a list of 100000 items");
  const std::string excerpt = json_excerpt(std::string(10'000, 'x'));
  EXPECT_EQ(excerpt.size(), 83u);  // 80 characters and "..."
}

// nlohmann's parser ends its input at a NUL byte: what followed one was ignored (a QA pass).
TEST(ReadJsonFile, ANulByteIsNotTheEndOfTheFile) {
  const std::string path = temp_path("nul.json");
  for (const std::string& text : {std::string("{\"default\": \"gpu:0\"}\0{\"garbage", 30), std::string("{\"a\": 1}\0", 9)}) {
    {
      std::ofstream out(path, std::ios::binary);
      out << text;
    }
    EXPECT_THAT([&] { (void)read_json_file(path, "placement"); }, ThrowsMessage<Error>(HasSubstr("a NUL byte after the value")));
  }
  {
    std::ofstream out(path, std::ios::binary);
    out << "{\"a\": 1}\n";
  }
  EXPECT_EQ(read_json_file(path, "placement"), nlohmann::json::parse(R"({"a": 1})"));
  std::filesystem::remove(path);
}

TEST(InQuotes, CutsALongNameAtACharacterBoundary) {
  EXPECT_EQ(in_quotes("conv1"), "'conv1'");
  EXPECT_EQ(in_quotes(std::string(200, 'a')), "'" + std::string(200, 'a') + "'");
  EXPECT_EQ(in_quotes(std::string(1'000'000, 'a')), "'" + std::string(200, 'a') + "...' (1000000 bytes)");
  // 199 bytes, then a two-byte character across the cut: cut before it.
  const std::string name = std::string(199, 'a') + "\xc3\xa9" + std::string(10, 'b');
  EXPECT_EQ(in_quotes(name), "'" + std::string(199, 'a') + "...' (211 bytes)");
}

// The prefixes messages cut names to (80 bytes, 40 for attribute values) end at a character
// boundary: a cut inside a UTF-8 sequence showed as an escaped byte.
TEST(Utf8Prefix, CutsAtACharacterBoundary) {
  EXPECT_EQ(utf8_prefix("conv", 80), "conv");
  EXPECT_EQ(utf8_prefix("conv", 2), "co");
  EXPECT_EQ(utf8_prefix("ab\xe2\x82\xac", 4), "ab");  // a three-byte character across the cut
  EXPECT_EQ(utf8_prefix("ab\xe2\x82\xac", 5), "ab\xe2\x82\xac");
  EXPECT_EQ(utf8_prefix("\xc3\xa9", 1), "");
}

}  // namespace
}  // namespace placer
