package contract

// CredentialDefaultTTL exposes credentialDefaultTTL to the external tests.
const CredentialDefaultTTL = credentialDefaultTTL
