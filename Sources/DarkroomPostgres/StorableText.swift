extension String {
  /// The text as PostgreSQL's `text` can hold it, bounded in bytes: NUL removed (a `text` value
  /// cannot hold it), and at most `maxBytes` bytes of UTF-8, cut between characters (or, inside a
  /// character longer than the bound, between Unicode scalars).
  func storable(maxBytes: Int) -> String {
    var text = contains("\0") ? String(String.UnicodeScalarView(unicodeScalars.filter { $0 != "\0" })) : self
    guard text.utf8.count > maxBytes else { return text }
    var kept = ""
    var bytes = 0
    for character in text {
      let size = character.utf8.count
      if bytes + size > maxBytes {
        // A character larger than what is left: as many of its scalars as fit.
        for scalar in character.unicodeScalars {
          let scalarSize = String(scalar).utf8.count
          guard bytes + scalarSize <= maxBytes else { break }
          kept.unicodeScalars.append(scalar)
          bytes += scalarSize
        }
        break
      }
      kept.append(character)
      bytes += size
    }
    text = kept
    return text
  }
}
