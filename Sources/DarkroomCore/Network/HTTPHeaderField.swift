/// The rules a request header must keep before it is sent: a name of token characters and a value
/// with no line break, NUL or other control character (a tab aside), both bounded.
///
/// A value holding `\r\n` would end the header line and start another (header injection, request
/// smuggling through a proxy), so headers from pipeline files, from `ImageSource.headers` and from
/// cache entries (a stored `ETag` sent back in `If-None-Match`) are all checked.
///
/// ```swift
/// HTTPHeaderField.problem(name: "Referer", value: "https://a.example\r\nX-Evil: 1")
/// // "the value of Referer holds a line break or another control character"
/// ```
package enum HTTPHeaderField {
  /// The longest name and value accepted, in bytes.
  public static let maxNameBytes = 256
  public static let maxValueBytes = 8192

  /// What is wrong with a header, or `nil` when it may be sent.
  public static func problem(name: String, value: String) -> String? {
    let tokenPunctuation = Set("!#$%&'*+-.^_`|~".utf8)
    guard !name.isEmpty, name.utf8.count <= maxNameBytes,
      name.utf8.allSatisfy({ byte in
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
          || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || tokenPunctuation.contains(byte)
      })
    else {
      return "the header name \"\(name.prefix(40))\" is not a token (1 to \(maxNameBytes) letters, digits or !#$%&'*+-.^_`|~)"
    }
    guard value.utf8.count <= maxValueBytes else { return "the value of \(name) is over \(maxValueBytes) bytes" }
    guard !value.utf8.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) else {
      return "the value of \(name) holds a line break or another control character"
    }
    return nil
  }
}
