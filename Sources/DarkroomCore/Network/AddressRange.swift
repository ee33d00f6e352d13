/// An IP address range (CIDR), and the ranges that are not on the public internet.
///
/// The HTTP fetcher's SSRF guard checks every address it is about to connect to — after DNS
/// resolution and on every redirect hop — against ``nonPublic``, unless an allow-list opens it.
///
/// ```swift
/// let loopback = AddressRange("127.0.0.0/8")!
/// loopback.contains([127, 0, 0, 1])   // true
/// ```
package struct AddressRange: Sendable, Hashable, CustomStringConvertible {
  /// The network address: 4 bytes (IPv4) or 16 (IPv6).
  public let network: [UInt8]
  /// The prefix length in bits.
  public let prefixLength: Int

  /// Parses `a.b.c.d/n`, `x:y::z/n` or a single address (a /32 or /128 range).
  ///
  /// The prefix length is plain decimal (`/8`, not `/08`, `/+8` or an empty `/`). An IPv4-mapped
  /// range (`::ffff:a.b.c.d/n`, n ≥ 96) is the IPv4 range it maps, as addresses are compared.
  public init?(_ text: String) {
    let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
    guard let first = parts.first, let bytes = AddressRange.parseAddress(String(first)) else { return nil }
    let maxLength = bytes.count * 8
    var length = maxLength
    if parts.count == 2 {
      guard let written = AddressRange.prefixLength(parts[1], atMost: maxLength) else { return nil }
      length = written
    }
    let unmapped = AddressRange.unmapped(bytes)
    if unmapped.count == 4, bytes.count == 16, length >= 96 {
      network = unmapped
      prefixLength = length - 96
    } else {
      network = bytes
      prefixLength = length
    }
  }

  /// A prefix length written as 1 to 3 decimal digits without a leading zero, at most `maxLength`.
  private static func prefixLength(_ text: Substring, atMost maxLength: Int) -> Int? {
    let digits = text.utf8
    guard (1...3).contains(digits.count), digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
    else { return nil }
    guard digits.count == 1 || digits.first != UInt8(ascii: "0"), let value = Int(text), value <= maxLength
    else { return nil }
    return value
  }

  /// Whether an address (4 or 16 bytes) lies in the range. IPv4-mapped IPv6 addresses
  /// (`::ffff:a.b.c.d`) are compared as IPv4.
  public func contains(_ address: [UInt8]) -> Bool {
    let candidate = AddressRange.unmapped(address)
    guard candidate.count == network.count else { return false }
    var bits = prefixLength
    for index in 0..<network.count where bits > 0 {
      let mask: UInt8 = bits >= 8 ? 0xFF : ~(0xFF >> UInt8(bits))
      if candidate[index] & mask != network[index] & mask { return false }
      bits -= 8
    }
    return true
  }

  public var description: String { "\(AddressRange.format(network))/\(prefixLength)" }

  /// An address as text: dotted IPv4, or IPv6 with its longest run of zero groups as `::`.
  public static func format(_ address: [UInt8]) -> String {
    if address.count == 4 { return address.map(String.init).joined(separator: ".") }
    let groups = stride(from: 0, to: address.count - 1, by: 2).map { Int(address[$0]) << 8 | Int(address[$0 + 1]) }
    var best = (start: -1, length: 0)
    var index = 0
    while index < groups.count {
      var end = index
      while end < groups.count, groups[end] == 0 { end += 1 }
      if end - index > max(1, best.length) { best = (index, end - index) }
      index = end + 1
    }
    let text = groups.map { String($0, radix: 16) }
    guard best.start >= 0 else { return text.joined(separator: ":") }
    let head = text[..<best.start].joined(separator: ":")
    let tail = text[(best.start + best.length)...].joined(separator: ":")
    return head + "::" + tail
  }

  /// Loopback, private, link-local, carrier-grade NAT, multicast, reserved and documentation
  /// ranges, IPv4 and IPv6. IPv6 forms that embed an IPv4 address other than the mapped one
  /// (which is compared as IPv4) are refused whole: IPv4-compatible `::a.b.c.d` (`::/96`),
  /// IPv4-translated `::ffff:0:a.b.c.d` (`::ffff:0:0:0/96`), NAT64 (`64:ff9b::/96`), 6to4 and
  /// Teredo, since what they reach depends on the network's translators.
  public static let nonPublic: [AddressRange] =
    ([
      "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
      "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
      "224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32",
      "::/128", "::1/128", "::/96", "::ffff:0:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "2001::/32", "2002::/16", "100::/64",
      "2001:db8::/32", "fc00::/7",
      "fe80::/10", "ff00::/8",
    ] as [String]).compactMap { AddressRange($0) }

  /// Parses a dotted IPv4 or a textual IPv6 address into bytes.
  ///
  /// Read on the UTF-8 bytes (every request checks the address it connects to): Foundation's
  /// `contains` bridged the text to `NSString`, and splitting it allocated a string a part.
  public static func parseAddress(_ text: String) -> [UInt8]? {
    if text.utf8.contains(UInt8(ascii: ":")) { return parseIPv6(text) }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(4)
    var value = 0
    var digits = 0
    for byte in text.utf8 {
      if byte == UInt8(ascii: ".") {
        guard digits > 0, bytes.count < 3 else { return nil }
        bytes.append(UInt8(value))
        value = 0
        digits = 0
        continue
      }
      // One to three decimal digits a part (a leading zero is allowed, as UInt8("010") reads it).
      guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte), digits < 3 else { return nil }
      value = value * 10 + Int(byte - UInt8(ascii: "0"))
      digits += 1
      guard value <= 255 else { return nil }
    }
    guard digits > 0, bytes.count == 3 else { return nil }
    bytes.append(UInt8(value))
    return bytes
  }

  static func parseIPv6(_ text: String) -> [UInt8]? {
    var text = Substring(text)
    var tail: [UInt8] = []
    if let lastColon = text.lastIndex(of: ":"), text[text.index(after: lastColon)...].contains(".") {
      guard let v4 = parseAddress(String(text[text.index(after: lastColon)...])) else { return nil }
      tail = v4
      text = text[...lastColon]
      if text.hasSuffix(":") && !text.hasSuffix("::") { text = text.dropLast() }
    }
    let halves = text.components(separatedBy: "::")
    guard halves.count <= 2 else { return nil }
    func groups(_ part: String) -> [UInt16]? {
      if part.isEmpty { return [] }
      var values: [UInt16] = []
      for group in part.split(separator: ":", omittingEmptySubsequences: false) {
        guard !group.isEmpty, group.count <= 4, let value = UInt16(group, radix: 16) else { return nil }
        values.append(value)
      }
      return values
    }
    guard let head = groups(halves[0]) else { return nil }
    let rest = halves.count == 2 ? groups(halves[1]) : []
    guard let rest else { return nil }
    let available = 8 - tail.count / 2
    var all: [UInt16]
    if halves.count == 2 {
      guard head.count + rest.count < available + 1 else { return nil }
      all = head + Array(repeating: 0, count: available - head.count - rest.count) + rest
    } else {
      all = head
    }
    guard all.count == available else { return nil }
    return all.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] } + tail
  }

  /// Strips the IPv4-mapped prefix (`::ffff:0:0/96`).
  static func unmapped(_ address: [UInt8]) -> [UInt8] {
    if address.count == 16, address[0..<10].allSatisfy({ $0 == 0 }), address[10] == 0xFF, address[11] == 0xFF {
      return Array(address[12..<16])
    }
    return address
  }
}
