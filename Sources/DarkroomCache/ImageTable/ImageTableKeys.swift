import Crypto
import DarkroomCore
import Foundation

extension ImageTable {
  /// A stable 64-character entity id for a cache key of any length (hex SHA-256).
  public static func entityID(forKey key: String) -> String {
    SHA256.hash(data: Data(key.utf8)).map { String(format: "%02x", $0) }.joined()
  }

  /// The 16-byte tag recorded with entries to purge them by source.
  public static func sourceTag(for identity: String) -> [UInt8] {
    Array(SHA256.hash(data: Data(identity.utf8)).prefix(16))
  }
}
