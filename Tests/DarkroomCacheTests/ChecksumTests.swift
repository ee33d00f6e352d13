import DarkroomCache
import Testing

@Suite struct ChecksumTests {
  @Test func crc32MatchesTheStandardCheckValue() {
    // The CRC-32 check value of "123456789" (ISO-HDLC) is 0xCBF43926.
    #expect(Checksum.crc32(Array("123456789".utf8)) == 0xCBF4_3926)
  }

  @Test func crc32ContinuesAcrossChunks() {
    let bytes = Array("the quick brown fox".utf8)
    let whole = Checksum.crc32(bytes)
    let first = Checksum.crc32(Array(bytes[..<7]))
    #expect(Checksum.crc32(Array(bytes[7...]), initial: first) == whole)
    #expect(Checksum.crc32(Array("the quick brown fix".utf8)) != whole)
  }
}
