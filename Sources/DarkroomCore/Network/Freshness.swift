import Foundation

/// How long a response may be reused, from its `Cache-Control` and `Expires` headers.
///
/// This is what a cache stage with Nimbus' `maxAge == 0` rule ("use the response's headers")
/// needs. `no-store` forbids keeping it; `max-age` (or `s-maxage`) wins over `Expires`;
/// `no-cache` means "store but revalidate every time" (a lifetime of zero).
///
/// ```swift
/// let freshness = Freshness(headers: ["cache-control": "public, max-age=600"])
/// freshness.lifetime   // 600 seconds
/// ```
package enum Freshness: Sendable, Equatable {
  /// The response must not be stored.
  case noStore
  /// The response is fresh for this long after it was received.
  case lifetime(Duration)
  /// The headers say nothing; the cache decides.
  case unspecified

  /// Computes freshness from lower-cased response headers.
  public init(headers: [String: String], now: Date = Date()) {
    let directives = Freshness.directives(headers["cache-control"] ?? "")
    if directives["no-store"] != nil {
      self = .noStore
      return
    }
    if directives["no-cache"] != nil {
      self = .lifetime(.zero)
      return
    }
    for name in ["s-maxage", "max-age"] where directives[name] != nil {
      // An invalid value (negative, not a number, missing) makes the response stale, whatever
      // `Expires` says (RFC 9111 4.2.1); a value too large to count is 2^31 seconds (1.2.2).
      self = .lifetime(.seconds(Freshness.deltaSeconds(directives[name] ?? nil) ?? 0))
      return
    }
    if let expires = headers["expires"] {
      guard let date = HTTPDate.parse(expires) else {
        self = .lifetime(.zero)  // an invalid Expires means "already expired" (RFC 9111 5.3)
        return
      }
      let reference = headers["date"].flatMap(HTTPDate.parse) ?? now
      self = .lifetime(.seconds(max(0, Int(date.timeIntervalSince(reference)))))
      return
    }
    self = .unspecified
  }

  /// A `delta-seconds` value (RFC 9111 1.2.2): ASCII digits only, at most 2^31; `nil` when invalid.
  static func deltaSeconds(_ text: String?) -> Int? {
    guard let text, !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
    let cap = 2_147_483_648
    return text.utf8.count > 10 ? cap : min(Int(text) ?? cap, cap)
  }

  /// The lifetime, when there is one.
  public var lifetime: Duration? {
    if case .lifetime(let duration) = self { return duration }
    return nil
  }

  static func directives(_ header: String) -> [String: String?] {
    var result: [String: String?] = [:]
    for part in header.split(separator: ",") {
      let pieces = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
      guard let name = pieces.first?.lowercased(), !name.isEmpty else { continue }
      // A lifetime given twice is invalid, so the response is stale (RFC 9111 4.2.1): the later
      // value never wins.
      if result[name] != nil, name == "max-age" || name == "s-maxage" {
        result[name] = .some("given twice")
        continue
      }
      result[name] = pieces.count > 1 ? pieces[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")) : nil
    }
    return result
  }
}

/// HTTP dates (RFC 9110): IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) parsed and formatted by
/// hand — every response carries dates, and Foundation's formatters cost far more than the parse —
/// with the obsolete RFC 850 and asctime forms through `DateFormatter`.
package enum HTTPDate {
  private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
  private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]  // 1970-01-01 was a Thursday
  private static let obsoleteFormats = ["EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"]

  /// Parses an HTTP date, or `nil`.
  public static func parse(_ text: String) -> Date? {
    let trimmed = HTTPWhitespace.trimmed(text)
    if let date = parseFixdate(trimmed) { return date }
    // HTTP dates are short printable ASCII; DateFormatter traps on some other text ("Incorrect
    // range", found by fuzzing a Retry-After holding UTF-8 bytes), so it never sees any.
    guard trimmed.utf8.count <= 64, trimmed.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else { return nil }
    for format in obsoleteFormats {
      let formatter = DateFormatter()
      formatter.locale = Locale(identifier: "en_US_POSIX")
      formatter.timeZone = TimeZone(identifier: "GMT")
      formatter.dateFormat = format
      if let date = formatter.date(from: trimmed) { return date }
    }
    return nil
  }

  /// `Sun, 06 Nov 1994 08:49:37 GMT`. The year has four digits (RFC 9110 `4DIGIT`): a longer one
  /// overflowed the seconds count (found by fuzzing the HTTP response handling).
  static func parseFixdate(_ text: String) -> Date? {
    if let date = parseCanonicalFixdate(text) { return date }
    let parts = text.split(separator: " ")
    guard parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT", let day = Int(parts[1]), (1...31).contains(day),
      let monthIndex = months.firstIndex(of: parts[2].lowercased()), let year = Int(parts[3]), (1970...9999).contains(year)
    else { return nil }
    let clock = parts[4].split(separator: ":").compactMap { Int($0) }
    guard clock.count == 3, (0...23).contains(clock[0]), (0...59).contains(clock[1]), (0...60).contains(clock[2]) else {
      return nil
    }
    let days = daysFromCivil(year: year, month: monthIndex + 1, day: day)
    return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + clock[0] * 3600 + clock[1] * 60 + clock[2]))
  }

  /// The form servers send, `Sun, 06 Nov 1994 08:49:37 GMT` to the byte, read without making a
  /// string of each part (every response's `Last-Modified` is read); `nil` for any other text,
  /// which ``parseFixdate(_:)`` then reads part by part. Where both read a text, they agree.
  private static func parseCanonicalFixdate(_ text: String) -> Date? {
    var text = text
    return text.withUTF8 { bytes -> Date? in
      guard bytes.count == 29, bytes[3] == UInt8(ascii: ","), bytes[4] == 0x20, bytes[7] == 0x20, bytes[11] == 0x20,
        bytes[16] == 0x20, bytes[19] == UInt8(ascii: ":"), bytes[22] == UInt8(ascii: ":"), bytes[25] == 0x20,
        bytes[26] == UInt8(ascii: "G"), bytes[27] == UInt8(ascii: "M"), bytes[28] == UInt8(ascii: "T"),
        // An ASCII weekday: a non-ASCII character before the comma can join it into one
        // character, which the part-by-part reading (by characters) refuses.
        bytes[0..<3].allSatisfy({ (0x21...0x7E).contains($0) })
      else { return nil }
      func number(_ range: Range<Int>) -> Int? {
        var value = 0
        for byte in bytes[range] {
          guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
          value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
      }
      let month = String(decoding: bytes[8..<11], as: UTF8.self).lowercased()
      guard let day = number(5..<7), (1...31).contains(day), let monthIndex = months.firstIndex(of: month),
        let year = number(12..<16), (1970...9999).contains(year), let hour = number(17..<19), (0...23).contains(hour),
        let minute = number(20..<22), (0...59).contains(minute), let second = number(23..<25), (0...60).contains(second)
      else { return nil }
      let days = daysFromCivil(year: year, month: monthIndex + 1, day: day)
      return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + hour * 3600 + minute * 60 + second))
    }
  }

  /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
  static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yearOfEra = y - era * 400
    let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    return era * 146_097 + dayOfEra - 719_468
  }

  /// Formats a date as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
  public static func format(_ date: Date) -> String {
    let seconds = Int(date.timeIntervalSince1970.rounded(.down))
    let days = Int((Double(seconds) / 86_400).rounded(.down))
    let secondOfDay = seconds - days * 86_400
    // Civil from days (inverse of daysFromCivil).
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let dayOfEra = z - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let mp = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    let weekday = weekdays[((days % 7) + 7) % 7]
    func two(_ value: Int) -> String { value < 10 ? "0\(value)" : String(value) }
    let monthName = months[month - 1].prefix(1).uppercased() + months[month - 1].dropFirst()
    return
      "\(weekday), \(two(day)) \(monthName) \(year) \(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60)) GMT"
  }
}
