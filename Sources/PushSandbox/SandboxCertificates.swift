import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// A throwaway certificate authority and a server certificate for `localhost` / 127.0.0.1, so the
/// sandbox speaks real TLS and clients trust it through one CA file (`tls.ca_file`).
public struct SandboxCertificates: Sendable {
    /// The CA certificate in PEM, written to ``caFile``.
    public let caPEM: String
    /// Where the CA certificate was written.
    public let caFile: String
    let serverCertificatePEM: String
    let serverKeyPEM: String

    /// Generates a CA and a server certificate valid for a year and writes the CA to `directory/sandbox-ca.pem`.
    public static func generate(directory: String) throws -> SandboxCertificates {
        let now = Date()
        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName { CommonName("PushRelay Sandbox CA") }
        let ca = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(caKey.publicKey),
            notValidBefore: now - 3600,
            notValidAfter: now + 365 * 86_400,
            issuer: caName,
            subject: caName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(caKey)
        )
        let serverKey = P256.Signing.PrivateKey()
        let server = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(serverKey.publicKey),
            notValidBefore: now - 3600,
            notValidAfter: now + 365 * 86_400,
            issuer: caName,
            subject: try DistinguishedName { CommonName("localhost") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([.dnsName("localhost"), .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1]))])
            },
            issuerPrivateKey: .init(caKey)
        )
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let caFile = (directory as NSString).appendingPathComponent("sandbox-ca.pem")
        let caPEM = try ca.serializeAsPEM().pemString
        try caPEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        return SandboxCertificates(
            caPEM: caPEM,
            caFile: caFile,
            serverCertificatePEM: try server.serializeAsPEM().pemString,
            serverKeyPEM: serverKey.pemRepresentation
        )
    }

    /// The server side TLS configuration (TLS 1.2+).
    func serverTLSConfiguration() throws -> TLSConfiguration {
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(serverCertificatePEM.utf8), format: .pem))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(serverKeyPEM.utf8), format: .pem))
        )
        configuration.minimumTLSVersion = .tlsv12
        return configuration
    }
}
