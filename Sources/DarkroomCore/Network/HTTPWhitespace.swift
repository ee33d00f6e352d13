/// HTTP's optional whitespace (RFC 9110 5.6.3: spaces and tabs) around header values.
package enum HTTPWhitespace {
  /// `text` without the spaces and tabs at its ends, taken off its UTF-8 bytes.
  ///
  /// Foundation's `trimmingCharacters(in: .whitespaces)` bridges each string to `NSString` and
  /// also takes Unicode spaces that HTTP never treats as whitespace; on every response's date and
  /// content type it cost ~15 µs a transfer.
  ///
  /// ```swift
  /// HTTPWhitespace.trimmed(" image/jpeg\t")   // "image/jpeg"
  /// ```
  package static func trimmed(_ text: String) -> String { trimmed(text[...]) }

  /// `text` without the spaces and tabs at its ends.
  package static func trimmed(_ text: Substring) -> String {
    let bytes = text.utf8
    func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
    guard let first = bytes.firstIndex(where: { !isSpace($0) }) else { return "" }
    var end = bytes.endIndex
    while end > first, isSpace(bytes[bytes.index(before: end)]) { end = bytes.index(before: end) }
    return String(decoding: bytes[first..<end], as: UTF8.self)
  }
}
