import DarkroomCore
import Foundation
import Testing

@Suite("JSON parser")
struct JSONParserTests {
  func failure(_ text: String) -> String {
    do {
      _ = try JSONParser.parse(text)
      return "no error"
    } catch {
      #expect(error.code == .invalidDefinition)
      return error.message
    }
  }

  @Test func parsesValuesInOrder() throws {
    let value = try JSONParser.parse(#"{"b": [1, 2.5, -3e2], "a": {"t": true, "n": null}, "s": "x\n\u00e9\ud83d\ude00"}"#)
    guard case .object(let members) = value else {
      Issue.record("not an object")
      return
    }
    #expect(members.map(\.key) == ["b", "a", "s"])
    #expect(value["b"] == .array([1, 2.5, .number(-300, text: "-3e2")]))
    #expect(value["a"]?["t"] == .bool(true))
    #expect(value["s"] == .string("x\né😀"))
  }

  @Test("every \\u escape: pairs decode, lone or mismatched surrogates and non-hex digits are clear errors, none crash")
  func unicodeEscapes() throws {
    #expect(try JSONParser.parse(#""\uD83D\uDE00""#) == .string("😀"))
    #expect(try JSONParser.parse(#""\udbff\udfff""#) == .string("\u{10FFFF}"))
    #expect(try JSONParser.parse(#""\u0000\u00e9\uFFFF""#) == .string("\u{0}é\u{FFFF}"))
    let broken: [(text: String, says: String)] = [
      (#""\uD800\u0041""#, "not a low surrogate"),
      (#""\uD800\uD800""#, "not a low surrogate"),
      (#""\uD800\uE000""#, "not a low surrogate"),
      (#""\uD800""#, "not followed by a low one"),
      (#""\uD800x""#, "not followed by a low one"),
      (#""\uD800\n""#, "not followed by a low one"),
      (#""\uDC00""#, "without a high one"),
      (#""\uDFFF\uD800""#, "without a high one"),
      (#""\u+123""#, "four hex digits"),
      (#""\u-123""#, "four hex digits"),
      (#""\u 123""#, "four hex digits"),
      (#""\uD800\u+C00""#, "four hex digits"),
      (#""\u12""#, "four hex digits"),
    ]
    for (text, says) in broken {
      let message = failure(text)
      #expect(message.contains(says), "\(text): \(message)")
      #expect(message.contains("line 1, column"), "\(text): \(message)")
    }
    // Every combination of a high and a second escape, in a pipeline-sized document.
    for high in stride(from: 0xD800, through: 0xDBFF, by: 0x3F) {
      for second in stride(from: 0, through: 0xFFFF, by: 0x101) {
        let text = #"{"version": 1, "name": "\u"# + String(high, radix: 16) + #"\u"# + String(format: "%04x", second) + #""}"#
        let valid = (0xDC00...0xDFFF).contains(second)
        #expect((try? JSONParser.parse(text)) != nil || !valid, "\(text)")
        if !valid { #expect(failure(text).contains("surrogate"), "\(text)") }
      }
    }
  }

  @Test func reportsLineAndColumn() {
    #expect(
      failure("{\n  \"version\": 1,\n  \"stages\": [}\n") == "malformed JSON at line 3, column 14: expected a value but found '}'"
    )
    #expect(failure("{\"a\": 1 \"b\": 2}") == "malformed JSON at line 1, column 9: expected ',' or '}' but found '\"'")
    #expect(failure("{'a': 1}") == "malformed JSON at line 1, column 2: expected a key in double quotes but found '''")
    #expect(
      failure("")
        == "malformed JSON at line 1, column 1: the document is empty: a pipeline is a JSON object like {\"version\": 1, ...}")
    #expect(failure("[1, 2,]") == "malformed JSON at line 1, column 7: trailing comma before ']'")
    #expect(failure("{\"a\": \"unterminated}") == "malformed JSON at line 1, column 7: a string is not closed with '\"'")
  }

  @Test func refusesDuplicateKeys() {
    #expect(
      failure(#"{"stages": [{"stage": "resize", "width": 1, "width": 2}]}"#)
        == "malformed JSON at line 1, column 45: duplicate key \"width\" (stages[0].width): each option may appear once")
  }

  @Test func boundsDepthAndNumbers() {
    let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
    #expect(failure(deep).contains("nesting deeper than 64 levels"))
    #expect(failure("1e999").contains("the number 1e999 is out of range"))
    #expect(failure("01").contains("numbers may not start with 0"))
  }
}
