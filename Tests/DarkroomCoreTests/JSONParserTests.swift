import DarkroomCore
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
