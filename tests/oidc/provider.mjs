// A real OpenID provider for busconsole's tests: node's oidc-provider (the certified reference
// implementation), started by tests/oidc/provider.py on 127.0.0.1 and a free port.
//
//   node provider.mjs <port> <config.json> <state.json>
//
// config.json is read once: {client_id, client_secret, redirect_uris, post_logout_redirect_uris,
// claims_in_id_token}. state.json is read on every request, so a test changes it between logins:
//   users: {<login>: {password, groups, email, name}}  (the login is the subject, `sub`)
//   id_token: "valid" | "tampered" | "other_key" | "expired" | "wrong_audience" | "wrong_issuer"
//             | "wrong_nonce" | "alg_none"
// Every mode but "valid" rewrites the ID token of the token endpoint's answer the way a forger or a
// broken provider would: the console must refuse each. The login page checks the password, so "a new
// login asks for the password again" is observable; consent is granted without a page.
import crypto from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';

import Provider from 'oidc-provider';

const [port, configFile, stateFile] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configFile, 'utf8'));
const state = () => JSON.parse(readFileSync(stateFile, 'utf8'));
const issuer = `http://127.0.0.1:${port}`;
const KID = 'busconsole-test-key';

const signingKey = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
const otherKey = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
const jwk = { ...signingKey.export({ format: 'jwk' }), kid: KID, alg: 'RS256', use: 'sig' };

const b64 = (value) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
const decode = (part) => JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));

function sign(header, payload, key) {
  const input = `${b64(header)}.${b64(payload)}`;
  return `${input}.${crypto.sign('sha256', Buffer.from(input), key).toString('base64url')}`;
}

// What each mode makes of a valid ID token.
function rewrite(idToken, mode) {
  const [h, p, s] = idToken.split('.');
  const header = decode(h);
  const payload = decode(p);
  const now = Math.floor(Date.now() / 1000);
  switch (mode) {
    case 'tampered': // a claim changed after signing: the signature no longer matches
      return `${h}.${b64({ ...payload, sub: 'someone-else', groups: ['ops-admins'] })}.${s}`;
    case 'other_key': // signed by a key that is not the provider's, under the provider's key id
      return sign(header, payload, otherKey);
    case 'expired':
      return sign(header, { ...payload, iat: now - 7200, exp: now - 3600 }, signingKey);
    case 'wrong_audience':
      return sign(header, { ...payload, aud: 'another-client', azp: 'another-client' }, signingKey);
    case 'wrong_issuer':
      return sign(header, { ...payload, iss: 'https://idp.attacker.invalid' }, signingKey);
    case 'wrong_nonce':
      return sign(header, { ...payload, nonce: 'a-nonce-from-another-login' }, signingKey);
    case 'alg_none':
      return `${b64({ alg: 'none', typ: 'JWT' })}.${p}.`;
    default:
      return idToken;
  }
}

function page(title, body) {
  return `<!DOCTYPE html><html><head><meta charset="utf-8"><title>${title}</title></head>`
    + `<body><h1>${title}</h1>${body}</body></html>`;
}

const escape = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const provider = new Provider(issuer, {
  clients: [{
    client_id: config.client_id,
    client_secret: config.client_secret,
    redirect_uris: config.redirect_uris,
    post_logout_redirect_uris: config.post_logout_redirect_uris,
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  jwks: { keys: [jwk] },
  cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
    groups: ['groups'],
  },
  // false: the scopes' claims in the ID token too (as Okta or Azure AD put groups there); true, the
  // default: only in the userinfo answer (as this library and Keycloak without a mapper do).
  conformIdTokenClaims: !config.claims_in_id_token,
  pkce: { required: () => true }, // a login without PKCE fails: the tests prove the console sends it
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: {
      enabled: true,
      logoutSource: async (ctx, form) => {
        ctx.body = page('Sign out of the test provider?', `${form}<button type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button>`);
      },
      postLogoutSuccessSource: async (ctx) => {
        ctx.body = page('Signed out', '<p>You are signed out of the test provider.</p>');
      },
    },
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  async findAccount(ctx, sub) {
    const user = state().users[sub];
    if (!user) return undefined;
    return {
      accountId: sub,
      async claims() {
        return {
          sub, email: user.email, email_verified: true, name: user.name, preferred_username: sub, groups: user.groups,
        };
      },
    };
  },
  renderError: async (ctx, out) => {
    ctx.type = 'html';
    ctx.body = page('Provider error', `<pre>${escape(JSON.stringify(out))}</pre>`);
  },
});

provider.use(async (ctx, next) => {
  await next();
  if (ctx.path === '/token' && ctx.status === 200 && ctx.body && ctx.body.id_token) {
    ctx.body = { ...ctx.body, id_token: rewrite(ctx.body.id_token, state().id_token || 'valid') };
  }
});

function readForm(req) {
  return new Promise((resolve, reject) => {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => resolve(Object.fromEntries(new URLSearchParams(body))));
    req.on('error', reject);
  });
}

function loginForm(uid, error) {
  return page('Sign in to the test provider', `${error ? `<p class="error">${escape(error)}</p>` : ''}`
    + `<form method="post" action="/interaction/${uid}/login">`
    + '<label>Username <input name="username" autofocus></label>'
    + '<label>Password <input name="password" type="password"></label>'
    + '<button type="submit">Sign in</button></form>');
}

async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { uid, prompt, params } = details;
  if (prompt.name === 'consent') { // first-party console: every scope asked for is granted
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
    if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
    if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
    return;
  }
  if (req.method === 'POST' && req.url.endsWith('/login')) {
    const form = await readForm(req);
    const user = state().users[form.username];
    if (!user || user.password !== form.password) {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(loginForm(uid, 'Wrong username or password.'));
      return;
    }
    await provider.interactionFinished(req, res, { login: { accountId: form.username } }, { mergeWithLastSubmission: false });
    return;
  }
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end(loginForm(uid));
}

const callback = provider.callback();
const server = createServer((req, res) => {
  if (req.url.startsWith('/interaction/')) {
    interaction(req, res).catch((err) => {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end(`interaction failed: ${err.message}`);
    });
    return;
  }
  callback(req, res);
});
server.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(`listening ${issuer}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
