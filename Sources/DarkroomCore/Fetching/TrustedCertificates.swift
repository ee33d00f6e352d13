import Crypto
import Foundation

/// Certificate authorities that HTTPS transfers trust instead of the system's store.
///
/// A pipeline names them with the `fetch` options `caFile` (a PEM bundle) and `caPath` (an
/// OpenSSL hashed directory). Darkroom reads those files itself when the pipeline loads, under the
/// same confinement as local sources (``file(_:roots:)``, ``directory(_:roots:)``), checks that
/// they hold PEM certificates and nothing else, and hands libcurl only the certificate blocks it
/// checked (`CURLOPT_CAINFO_BLOB`), with libcurl's own CA file and directory switched off.
///
/// The checks are about shape, not about cryptography: each block must be base64 of a DER
/// sequence. OpenSSL parses the certificates when a connection is made; a block it cannot parse
/// then fails that transfer.
///
/// ```swift
/// let authorities = try TrustedCertificates.file("certs/internal-ca.pem", roots: ["/srv/config"])
/// var options = HTTPOptions()
/// options.trustedCertificates = authorities
/// ```
public struct TrustedCertificates: Sendable, Hashable {
  /// The certificate blocks, PEM text, one after the other.
  public let pem: [UInt8]
  /// How many certificates ``pem`` holds.
  public let count: Int
  /// Where they were read from (`caFile certs/ca.pem`), for messages.
  public var origin: String
  /// The first 16 hex digits of the SHA-256 of ``pem``: for stage identifiers (a `fetch` that
  /// trusts other authorities is another configuration). Computed once: identifiers are asked for
  /// often.
  public let digest: String

  /// The most bytes a CA file may have, and the most PEM text the certificates of one `fetch`
  /// stage may take together (a system bundle of about 140 authorities is about 220 KB).
  public static let maxBytes = 1_000_000
  /// The most certificates one `fetch` stage may trust.
  public static let maxCertificates = 1_000

  /// Checks PEM text: every `CERTIFICATE` (or `TRUSTED CERTIFICATE`) block must be base64 of a DER
  /// sequence, private keys are refused, other blocks (CRLs) and text between blocks are left out.
  ///
  /// - Parameters:
  ///   - text: The file's bytes.
  ///   - origin: Where they came from (`caFile ca.pem`): every message starts with it.
  /// - Throws: `invalidInput` saying what is wrong with the text; `tooLarge` past ``maxBytes`` or
  ///   ``maxCertificates``.
  public init(pem text: [UInt8], origin: String) throws(PipelineError) {
    guard text.count <= Self.maxBytes else {
      throw PipelineError(
        .tooLarge, "\(origin) is \(text.count) bytes, over the limit of \(Self.maxBytes) bytes for certificate authorities")
    }
    self.origin = origin
    var blocks: [String] = []
    for block in try PEMBlocks.parse(text, origin: origin) {
      switch block.label {
      case "CERTIFICATE", "TRUSTED CERTIFICATE":
        guard let der = Data(base64Encoded: block.body, options: .ignoreUnknownCharacters), Self.isCertificateShaped(der) else {
          throw PipelineError(
            .invalidInput, "\(origin): certificate \(blocks.count + 1) is not base64 of a DER certificate; the file is damaged")
        }
        blocks.append(block.text)
      case let label where label.hasSuffix("PRIVATE KEY"):
        throw PipelineError(
          .invalidInput,
          "\(origin) holds a private key (\(label)); give a file of CA certificates only, and keep the key secret")
      default:
        continue  // a CRL or other PEM: libcurl's CA file would ignore it too
      }
      guard blocks.count <= Self.maxCertificates else {
        throw PipelineError(.tooLarge, "\(origin) holds more than \(Self.maxCertificates) certificates")
      }
    }
    guard !blocks.isEmpty else {
      // (A DER file is not UTF-8, so PEMBlocks already said so.)
      throw PipelineError(
        .invalidInput, "\(origin) holds no PEM certificate: expected one or more blocks starting with -----BEGIN CERTIFICATE-----"
      )
    }
    pem = Array(blocks.joined().utf8)
    count = blocks.count
    digest = SHA256.hash(data: pem).prefix(8).map { String(format: "%02x", $0) }.joined()
  }

  /// Whether `der` is one DER sequence that spans it exactly and starts with another sequence (a
  /// certificate's `tbsCertificate`): the outline of an X.509 certificate, not a proof of one.
  static func isCertificateShaped(_ der: Data) -> Bool {
    let bytes = [UInt8](der)
    guard bytes.count >= 4, bytes[0] == 0x30 else { return false }
    var length = Int(bytes[1])
    var header = 2
    if length >= 0x80 {
      let count = length & 0x7f
      guard (1...3).contains(count), bytes.count >= 2 + count else { return false }
      length = bytes[2..<(2 + count)].reduce(0) { $0 << 8 | Int($1) }
      header += count
    }
    return length > 0 && header + length == bytes.count && bytes[header] == 0x30
  }

  /// Both sets of authorities in one (a `fetch` stage with `caFile` and `caPath`), bounded like one.
  public func adding(_ other: TrustedCertificates) throws(PipelineError) -> TrustedCertificates {
    try TrustedCertificates(pem: pem + other.pem, origin: "\(origin) and \(other.origin)")
  }

}

/// The blocks of PEM text (`-----BEGIN LABEL-----` … `-----END LABEL-----`).
enum PEMBlocks {
  struct Block {
    var label: String
    /// The base64 between the lines.
    var body: String
    /// The block as text, its lines included, ending in a line break.
    var text: String
  }

  static func parse(_ bytes: [UInt8], origin: String) throws(PipelineError) -> [Block] {
    guard let text = String(validating: bytes, as: UTF8.self), !text.contains("\0") else {
      let looksDER = bytes.starts(with: [0x30, 0x82])
      let advice =
        looksDER
        ? "it looks like a DER (binary) certificate: convert it with `openssl x509 -inform der -in FILE -out FILE.pem`"
        : "a CA file is PEM text (-----BEGIN CERTIFICATE----- blocks)"
      throw PipelineError(.invalidInput, "\(origin) is not text: \(advice)")
    }
    var blocks: [Block] = []
    var open: (label: String, lines: [Substring])?
    for (number, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
      let line = raw.trimmingCharacters(in: .whitespaces)
      if let current = open {
        if line == "-----END \(current.label)-----" {
          let body = current.lines.joined(separator: "\n")
          blocks.append(
            Block(
              label: current.label, body: body,
              text: "-----BEGIN \(current.label)-----\n" + (body.isEmpty ? "" : body + "\n") + "\(line)\n"))
          open = nil
        } else if line.hasPrefix("-----") {
          throw PipelineError(
            .invalidInput,
            "\(origin): line \(number + 1) starts a new PEM marker inside a \(current.label) block that has no END line")
        } else {
          open?.lines.append(Substring(line))
        }
      } else if line.hasPrefix("-----BEGIN "), line.hasSuffix("-----"), line.count > 16 {
        open = (String(line.dropFirst(11).dropLast(5)), [])
      }
    }
    if let open {
      throw PipelineError(.invalidInput, "\(origin): the last \(open.label) block has no -----END \(open.label)----- line")
    }
    return blocks
  }
}
