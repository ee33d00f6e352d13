/// A strict JSON parser that reports where a document is malformed (line and column), refuses
/// duplicate keys and bounds nesting depth.
///
/// Pipeline files are written by people and may come from untrusted places; Foundation's parser
/// accepts duplicate keys silently and does not bound depth, so definitions use this one.
///
/// ```swift
/// let value = try JSONParser.parse(#"{"version": 1}"#)
/// ```
package enum JSONParser {
  /// The deepest nesting accepted.
  public static let maxDepth = 64

  /// Parses a whole document. Throws `invalidDefinition` with "line L, column C" in the message.
  public static func parse(_ text: String) throws(PipelineError) -> JSONValue {
    var scanner = Scanner(bytes: Array(text.utf8))
    return try scanner.document()
  }

  private struct Scanner {
    let bytes: [UInt8]
    var index = 0
    var depth = 0

    mutating func document() throws(PipelineError) -> JSONValue {
      skipWhitespace()
      if index >= bytes.count { throw failure("the document is empty: a pipeline is a JSON object like {\"version\": 1, ...}") }
      let value = try parseValue(path: "")
      skipWhitespace()
      if index < bytes.count { throw failure("unexpected \(describeCurrent()) after the end of the document") }
      return value
    }

    func position(of offset: Int) -> (line: Int, column: Int) {
      var line = 1
      var column = 1
      for byte in bytes[..<min(offset, bytes.count)] {
        if byte == UInt8(ascii: "\n") {
          line += 1
          column = 1
        } else if byte & 0xC0 != 0x80 {
          column += 1
        }
      }
      return (line, column)
    }

    func failure(_ message: String, at offset: Int? = nil) -> PipelineError {
      let (line, column) = position(of: offset ?? index)
      let text = "malformed JSON at line \(line), column \(column): \(message)"
      return PipelineError(.invalidDefinition, text, issues: [.init(code: .invalidDefinition, path: "", message: text)])
    }

    func describeCurrent() -> String {
      guard index < bytes.count else { return "end of file" }
      let byte = bytes[index]
      if byte >= 0x20 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
      return "byte 0x\(String(byte, radix: 16))"
    }

    mutating func skipWhitespace() {
      while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    mutating func parseValue(path: String) throws(PipelineError) -> JSONValue {
      skipWhitespace()
      guard index < bytes.count else { throw failure("unexpected end of file: a value is missing") }
      switch bytes[index] {
      case UInt8(ascii: "{"): return try parseObject(path: path)
      case UInt8(ascii: "["): return try parseArray(path: path)
      case UInt8(ascii: "\""): return .string(try parseString())
      case UInt8(ascii: "t"): return try literal("true", .bool(true))
      case UInt8(ascii: "f"): return try literal("false", .bool(false))
      case UInt8(ascii: "n"): return try literal("null", .null)
      case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
      default:
        throw failure(
          "expected a value but found \(describeCurrent())"
            + (bytes[index] == UInt8(ascii: "'") ? " (JSON strings use double quotes)" : ""))
      }
    }

    mutating func literal(_ word: String, _ value: JSONValue) throws(PipelineError) -> JSONValue {
      let utf8 = Array(word.utf8)
      guard index + utf8.count <= bytes.count, Array(bytes[index..<index + utf8.count]) == utf8 else {
        throw failure("expected \(word) but found \(describeCurrent())")
      }
      index += utf8.count
      return value
    }

    mutating func enter() throws(PipelineError) {
      depth += 1
      if depth > JSONParser.maxDepth { throw failure("nesting deeper than \(JSONParser.maxDepth) levels") }
    }

    mutating func parseObject(path: String) throws(PipelineError) -> JSONValue {
      try enter()
      defer { depth -= 1 }
      index += 1
      var members: [(key: String, value: JSONValue)] = []
      var seen = Set<String>()
      skipWhitespace()
      if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
        index += 1
        return .object(members)
      }
      while true {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
          throw failure("expected a key in double quotes but found \(describeCurrent())")
        }
        let keyStart = index
        let key = try parseString()
        if !seen.insert(key).inserted {
          let keyPath = path.isEmpty ? key : "\(path).\(key)"
          throw failure("duplicate key \"\(key)\" (\(keyPath)): each option may appear once", at: keyStart)
        }
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
          throw failure("expected ':' after the key \"\(key)\" but found \(describeCurrent())")
        }
        index += 1
        members.append((key, try parseValue(path: path.isEmpty ? key : "\(path).\(key)")))
        skipWhitespace()
        guard index < bytes.count else { throw failure("unexpected end of file: an object is not closed with '}'") }
        if bytes[index] == UInt8(ascii: ",") {
          index += 1
          skipWhitespace()
          if index < bytes.count, bytes[index] == UInt8(ascii: "}") { throw failure("trailing comma before '}'") }
          continue
        }
        if bytes[index] == UInt8(ascii: "}") {
          index += 1
          return .object(members)
        }
        throw failure("expected ',' or '}' but found \(describeCurrent())")
      }
    }

    mutating func parseArray(path: String) throws(PipelineError) -> JSONValue {
      try enter()
      defer { depth -= 1 }
      index += 1
      var items: [JSONValue] = []
      skipWhitespace()
      if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
        index += 1
        return .array(items)
      }
      while true {
        items.append(try parseValue(path: "\(path)[\(items.count)]"))
        skipWhitespace()
        guard index < bytes.count else { throw failure("unexpected end of file: an array is not closed with ']'") }
        if bytes[index] == UInt8(ascii: ",") {
          index += 1
          skipWhitespace()
          if index < bytes.count, bytes[index] == UInt8(ascii: "]") { throw failure("trailing comma before ']'") }
          continue
        }
        if bytes[index] == UInt8(ascii: "]") {
          index += 1
          return .array(items)
        }
        throw failure("expected ',' or ']' but found \(describeCurrent())")
      }
    }

    mutating func parseString() throws(PipelineError) -> String {
      let start = index
      index += 1
      var chunkStart = index
      func flush(_ scanner: Scanner, _ end: Int) -> String { String(decoding: scanner.bytes[chunkStart..<end], as: UTF8.self) }
      var result = ""
      while index < bytes.count {
        let byte = bytes[index]
        if byte == UInt8(ascii: "\"") {
          result += flush(self, index)
          index += 1
          return result
        }
        if byte < 0x20 { throw failure("control character in a string (escape newlines as \\n)") }
        if byte == UInt8(ascii: "\\") {
          result += flush(self, index)
          index += 1
          guard index < bytes.count else { break }
          let escape = bytes[index]
          index += 1
          switch escape {
          case UInt8(ascii: "\""): result += "\""
          case UInt8(ascii: "\\"): result += "\\"
          case UInt8(ascii: "/"): result += "/"
          case UInt8(ascii: "b"): result += "\u{08}"
          case UInt8(ascii: "f"): result += "\u{0C}"
          case UInt8(ascii: "n"): result += "\n"
          case UInt8(ascii: "r"): result += "\r"
          case UInt8(ascii: "t"): result += "\t"
          case UInt8(ascii: "u"):
            let escapeStart = index - 2
            var code = try hex4()
            if (0xDC00..<0xE000).contains(code) {
              throw failure("invalid \\u escape: a low surrogate (\\u\(hex(code))) without a high one before it", at: escapeStart)
            }
            if (0xD800..<0xDC00).contains(code) {
              // A high surrogate must be followed by an escaped low surrogate (U+DC00...U+DFFF).
              guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw failure("invalid \\u escape: a high surrogate (\\u\(hex(code))) not followed by a low one", at: escapeStart)
              }
              index += 2
              let low = try hex4()
              guard (0xDC00..<0xE000).contains(low) else {
                throw failure(
                  "invalid \\u escape: a high surrogate (\\u\(hex(code))) followed by \\u\(hex(low)), not a low surrogate",
                  at: escapeStart)
              }
              code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let scalar = Unicode.Scalar(code) else {
              throw failure("invalid \\u escape: U+\(hex(code)) is not a Unicode scalar", at: escapeStart)
            }
            result.unicodeScalars.append(scalar)
          default: throw failure("invalid escape '\\\(Character(Unicode.Scalar(escape)))' in a string", at: index - 2)
          }
          chunkStart = index
          continue
        }
        index += 1
      }
      throw failure("a string is not closed with '\"'", at: start)
    }

    /// Four hex digits (only digits: `UInt32(_:radix:)` alone would also take a sign).
    mutating func hex4() throws(PipelineError) -> UInt32 {
      guard index + 4 <= bytes.count else { throw failure("invalid \\u escape: expected four hex digits") }
      var code: UInt32 = 0
      for byte in bytes[index..<index + 4] {
        let digit: UInt8
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
        default: throw failure("invalid \\u escape: expected four hex digits")
        }
        code = code << 4 | UInt32(digit)
      }
      index += 4
      return code
    }

    func hex(_ code: UInt32) -> String {
      let digits = String(code, radix: 16, uppercase: true)
      return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    mutating func parseNumber() throws(PipelineError) -> JSONValue {
      let start = index
      if bytes[index] == UInt8(ascii: "-") { index += 1 }
      func digits(_ scanner: inout Scanner) -> Int {
        let begin = scanner.index
        while scanner.index < scanner.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(scanner.bytes[scanner.index])
        {
          scanner.index += 1
        }
        return scanner.index - begin
      }
      let intDigits = digits(&self)
      if intDigits == 0 { throw failure("a number needs digits after '-'") }
      if intDigits > 1, bytes[start + (bytes[start] == UInt8(ascii: "-") ? 1 : 0)] == UInt8(ascii: "0") {
        throw failure("numbers may not start with 0", at: start)
      }
      if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
        index += 1
        if digits(&self) == 0 { throw failure("a number needs digits after '.'") }
      }
      if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
        index += 1
        if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
        if digits(&self) == 0 { throw failure("a number needs digits in its exponent") }
      }
      let text = String(decoding: bytes[start..<index], as: UTF8.self)
      guard let value = Double(text), value.isFinite else { throw failure("the number \(text) is out of range", at: start) }
      return .number(value, text: text)
    }
  }
}
