//! The sandbox's fixed credentials: published test values, never secrets (see `keys/README.md`).
//! `tally serve` configures a gateway with these when it points the gateway at the sandbox.

/// Every credential the seven simulated providers and their gateways share.
#[derive(Debug, Clone, Copy)]
pub struct SandboxCredentials {
    /// The key Tally signs requests with (WeChat Pay, Alipay, Waffo), PKCS#8 PEM.
    pub merchant_private_pem: &'static str,
    /// Its public half, SPKI PEM (the sandbox verifies requests with it).
    pub merchant_public_pem: &'static str,
    /// The key the sandbox signs webhooks with, PKCS#8 PEM.
    pub provider_private_pem: &'static str,
    /// Its public half, SPKI PEM (the gateway verifies webhooks with it).
    pub provider_public_pem: &'static str,
    /// The API key or secret key of the API-key providers (Stripe-like, Creem, Dodo, Waffo).
    pub api_key: &'static str,
    /// The HMAC webhook secret (Stripe-like `whsec_…` as a plain string, Creem).
    pub hmac_secret: &'static str,
    /// The Standard Webhooks secret (Dodo): `whsec_` + base64 of the key bytes.
    pub standard_webhooks_secret: &'static str,
    /// WeChat Pay's APIv3 key (32 ASCII characters; AES-256-GCM key of notifications).
    pub wechat_api_v3_key: &'static str,
    /// WeChat Pay merchant id.
    pub wechat_mch_id: &'static str,
    /// WeChat Pay / Alipay app id.
    pub app_id: &'static str,
    /// Serial number of the merchant certificate (WeChat `serial_no`).
    pub merchant_serial: &'static str,
    /// Id of the platform public key (WeChat `Wechatpay-Serial`, `PUB_KEY_ID_…`).
    pub platform_key_id: &'static str,
    /// The WeChat Pay platform certificate (PEM) of certificate mode, self-signed for the
    /// sandbox (`openssl req -x509 -set_serial 0x<serial>` over its own key).
    pub wechat_platform_cert_pem: &'static str,
    /// Its private key, PKCS#8 PEM (the sandbox signs with it in certificate mode).
    pub wechat_platform_cert_private_pem: &'static str,
    /// Its serial number (`Wechatpay-Serial` in certificate mode).
    pub wechat_platform_cert_serial: &'static str,
    /// Alipay seller id (the merchant's `2088…` user id, `seller_id` of its trades).
    pub alipay_seller_id: &'static str,
    /// PayPal client id.
    pub paypal_client_id: &'static str,
    /// PayPal client secret.
    pub paypal_client_secret: &'static str,
    /// PayPal webhook id.
    pub paypal_webhook_id: &'static str,
    /// PayPal merchant id (the payee of its orders and captures, the seller of its disputes).
    pub paypal_merchant_id: &'static str,
    /// Creem's webhook secret (`mor_a`): `whsec_` + base64 of the key bytes, so that it serves
    /// both `creem-signature` (the string as is) and Standard Webhooks (the decoded key).
    pub creem_webhook_secret: &'static str,
}

/// The sandbox credentials.
pub const CREDENTIALS: SandboxCredentials = SandboxCredentials {
    merchant_private_pem: include_str!("../keys/merchant_private.pem"),
    merchant_public_pem: include_str!("../keys/merchant_public.pem"),
    provider_private_pem: include_str!("../keys/provider_private.pem"),
    provider_public_pem: include_str!("../keys/provider_public.pem"),
    api_key: "sk_sandbox_tally_0000000000000000",
    hmac_secret: "whsec_sandbox_tally_hmac_0000000000",
    // base64 of "tally-sandbox-standard-webhooks!" (32 bytes).
    standard_webhooks_secret: "whsec_dGFsbHktc2FuZGJveC1zdGFuZGFyZC13ZWJob29rcyE=",
    wechat_api_v3_key: "tallysandboxapiv3key000000000000",
    wechat_mch_id: "1900000109",
    app_id: "wx_sandbox_tally",
    merchant_serial: "5157F09EFDC096DE15EBE81A47057A7232F1B8E1",
    platform_key_id: "PUB_KEY_ID_0000000000000000000000",
    wechat_platform_cert_pem: include_str!("../keys/wechat_platform_cert.pem"),
    wechat_platform_cert_private_pem: include_str!("../keys/wechat_platform_cert_private.pem"),
    wechat_platform_cert_serial: "3775B6A45ACD588826FF00C1EB6FC7FF2F5C2CC0",
    alipay_seller_id: "2088000000000000",
    paypal_client_id: "sandbox-client-id",
    paypal_client_secret: "sandbox-client-secret",
    paypal_webhook_id: "WH-SANDBOX-TALLY",
    paypal_merchant_id: "SANDBOXMERCHANT",
    // base64 of "tally-sandbox-creem-webhook-key!" (32 bytes).
    creem_webhook_secret: "whsec_dGFsbHktc2FuZGJveC1jcmVlbS13ZWJob29rLWtleSE=",
};
