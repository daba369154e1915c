//! Page requests and pages, with the limits the API promises (spec 4.2).

/// The page size used when the caller gives none.
pub const DEFAULT_LIMIT: u32 = 20;
/// The largest page size.
pub const MAX_LIMIT: u32 = 100;
/// The largest page number (a bound on offsets, so a page query can never be made absurdly deep).
pub const MAX_PAGE: u32 = 100_000;

/// Why a page request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PaginationError {
    /// `page` is below 1 or above [`MAX_PAGE`].
    #[error("page must be between 1 and {MAX_PAGE}")]
    Page,
    /// `limit` is below 1 or above [`MAX_LIMIT`].
    #[error("limit must be between 1 and {MAX_LIMIT}")]
    Limit,
}

/// A validated `page` and `limit`, both counted from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    page: u32,
    limit: u32,
}

impl PageRequest {
    /// Validate `page` and `limit`, defaulting to page 1 and [`DEFAULT_LIMIT`].
    ///
    /// # Errors
    /// Values out of range.
    pub fn new(page: Option<i64>, limit: Option<i64>) -> Result<Self, PaginationError> {
        let page = page.unwrap_or(1);
        let limit = limit.unwrap_or(i64::from(DEFAULT_LIMIT));
        let page = u32::try_from(page)
            .ok()
            .filter(|p| (1..=MAX_PAGE).contains(p))
            .ok_or(PaginationError::Page)?;
        let limit = u32::try_from(limit)
            .ok()
            .filter(|l| (1..=MAX_LIMIT).contains(l))
            .ok_or(PaginationError::Limit)?;
        Ok(Self { page, limit })
    }

    /// The page number, from 1.
    #[must_use]
    pub const fn page(self) -> u32 {
        self.page
    }

    /// The page size.
    #[must_use]
    pub const fn limit(self) -> u32 {
        self.limit
    }

    /// Rows to skip.
    #[must_use]
    pub const fn offset(self) -> u64 {
        (self.page as u64 - 1) * self.limit as u64
    }
}

/// One page of items and the size of the whole list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// The items on this page.
    pub items: Vec<T>,
    /// Which page this is.
    pub request: PageRequest,
    /// How many items the whole list has.
    pub total: u64,
}

impl<T> Page<T> {
    /// How many pages the whole list has (0 for an empty list).
    #[must_use]
    pub fn total_pages(&self) -> u64 {
        self.total.div_ceil(u64::from(self.request.limit()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bounds() {
        let p = PageRequest::new(None, None).unwrap();
        assert_eq!((p.page(), p.limit(), p.offset()), (1, 20, 0));
        assert_eq!(PageRequest::new(Some(3), Some(100)).unwrap().offset(), 200);
        assert_eq!(PageRequest::new(Some(0), None), Err(PaginationError::Page));
        assert_eq!(PageRequest::new(Some(-1), None), Err(PaginationError::Page));
        assert_eq!(
            PageRequest::new(None, Some(101)),
            Err(PaginationError::Limit)
        );
        assert_eq!(PageRequest::new(None, Some(0)), Err(PaginationError::Limit));
        let page = Page {
            items: vec![1],
            request: PageRequest::new(None, Some(20)).unwrap(),
            total: 41,
        };
        assert_eq!(page.total_pages(), 3);
    }
}
