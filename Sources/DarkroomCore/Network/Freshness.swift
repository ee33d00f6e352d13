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
public enum Freshness: Sendable, Equatable {
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
    for name in ["s-maxage", "max-age"] {
      if let text = directives[name] ?? nil, let seconds = Int(text), seconds >= 0 {
        self = .lifetime(.seconds(seconds))
        return
      }
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
      result[name] = pieces.count > 1 ? pieces[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")) : nil
    }
    return result
  }
}

/// HTTP dates (RFC 9110 IMF-fixdate, plus the obsolete RFC 850 and asctime forms).
public enum HTTPDate {
  private static let formats = ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"]

  /// Parses an HTTP date, or `nil`.
  public static func parse(_ text: String) -> Date? {
    for format in formats {
      let formatter = DateFormatter()
      formatter.locale = Locale(identifier: "en_US_POSIX")
      formatter.timeZone = TimeZone(identifier: "GMT")
      formatter.dateFormat = format
      if let date = formatter.date(from: text.trimmingCharacters(in: .whitespaces)) { return date }
    }
    return nil
  }

  /// Formats a date as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
  public static func format(_ date: Date) -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return formatter.string(from: date)
  }
}
