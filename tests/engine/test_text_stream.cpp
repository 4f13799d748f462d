// Streaming text: stop strings across token boundaries, UTF-8 split across tokens.
#include "engine/text_stream.h"

#include <gtest/gtest.h>

namespace infer::engine {
namespace {

struct Collect {
  std::vector<std::string> pieces;
  std::function<void(const std::string&)> fn() {
    return [this](const std::string& p) { pieces.push_back(p); };
  }
  std::string joined() const {
    std::string s;
    for (auto& p : pieces) s += p;
    return s;
  }
};

TEST(TextStream, PassesTextThroughWithoutStops) {
  Collect c;
  TextStream t({}, c.fn());
  EXPECT_FALSE(t.add("Hello"));
  EXPECT_FALSE(t.add(", world"));
  t.finish();
  EXPECT_EQ(t.text(), "Hello, world");
  EXPECT_EQ(c.pieces, (std::vector<std::string>{"Hello", ", world"}));
}

TEST(TextStream, StopStringSpanningTokensIsCutAndNeverEmitted) {
  Collect c;
  TextStream t({"\nUser:"}, c.fn());
  EXPECT_FALSE(t.add("Fine.\nUs"));
  EXPECT_EQ(c.joined(), "Fine.");  // "\nUs" could start the stop string: held back
  EXPECT_TRUE(t.add("er: hi"));
  t.finish();
  EXPECT_EQ(t.text(), "Fine.");
  EXPECT_EQ(c.joined(), "Fine.");
  EXPECT_TRUE(t.add("more"));  // ignored after the stop
  EXPECT_EQ(t.text(), "Fine.");
}

TEST(TextStream, HeldPrefixIsReleasedWhenItDoesNotMatch) {
  Collect c;
  TextStream t({"STOP"}, c.fn());
  t.add("a ST");
  EXPECT_EQ(c.joined(), "a ");
  t.add("ART");
  EXPECT_EQ(c.joined(), "a START");
  t.add("ST");
  t.finish();  // end of generation releases the partial match
  EXPECT_EQ(t.text(), "a STARTST");
}

TEST(TextStream, EarliestOfSeveralStopsWins) {
  TextStream t({"cd", "b"}, {});
  EXPECT_TRUE(t.add("abcd"));
  EXPECT_EQ(t.text(), "a");
}

TEST(TextStream, Utf8CharacterSplitAcrossTokensIsHeldUntilComplete) {
  Collect c;
  TextStream t({}, c.fn());
  const std::string euro = "\xE2\x82\xAC";  // €
  t.add("x" + euro.substr(0, 1));
  EXPECT_EQ(c.joined(), "x");
  t.add(euro.substr(1, 1));
  EXPECT_EQ(c.joined(), "x");
  t.add(euro.substr(2, 1) + "y");
  EXPECT_EQ(c.joined(), "x" + euro + "y");
  for (auto& p : c.pieces) EXPECT_EQ(incomplete_utf8_tail(p), 0u) << p;
}

TEST(TextStream, IncompleteTailDetection) {
  EXPECT_EQ(incomplete_utf8_tail("abc"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("a\xC3"), 1u);
  EXPECT_EQ(incomplete_utf8_tail("a\xC3\xA9"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_tail("\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(incomplete_utf8_tail(""), 0u);
}

}  // namespace
}  // namespace infer::engine
